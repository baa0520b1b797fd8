package commands

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/stretchr/testify/require"

	"github.com/crewlog/crewlog/events"
)

// TestACutSettlesRetryIsTheRequestAsSent: a settle whose text its caller cut to fit its frame's readers was
// fingerprinted as cut, so that its retry through a frame that cuts otherwise (a crewd restarted with another
// --max-frame, another node of a cluster) was refused "commandId already used for a different request" instead of
// answered the recorded outcome. It is fingerprinted as sent (SentText); an outcome a build before SentText
// recorded, under the digest of the text as cut, still answers a retry cut the same.
func TestACutSettlesRetryIsTheRequestAsSent(t *testing.T) {
	const sent = "a long result, cut to what the readers' frame holds"
	cutAt := func(n int) *DelegateSettle {
		c := &DelegateSettle{RunID: "R", Outcome: OutcomeOK, Text: sent[:n], SentText: sent}
		if n == len(sent) {
			c.SentText = ""
		}
		return c
	}
	for _, tc := range []struct {
		name        string
		first, then *DelegateSettle
		reused      bool
	}{
		{"cut then cut otherwise", cutAt(10), cutAt(20), false},
		{"cut then uncut", cutAt(10), cutAt(len(sent)), false},
		{"uncut then cut", cutAt(len(sent)), cutAt(10), false},
		{"recorded as cut by a build before, retried cut the same", &DelegateSettle{RunID: "R", Outcome: OutcomeOK,
			Text: sent[:10]}, cutAt(10), false},
		// NB: what a build before recorded for a cut text is the cut alone: a retry through a frame that cuts
		// otherwise cannot be told from another request (docs/protocol.md).
		{"recorded as cut by a build before, retried cut otherwise", &DelegateSettle{RunID: "R", Outcome: OutcomeOK,
			Text: sent[:10]}, cutAt(20), true},
		{"another text cut the same", cutAt(10), &DelegateSettle{RunID: "R", Outcome: OutcomeOK, Text: sent[:10],
			SentText: sent[:10] + " and something else"}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := openEngine(t, vfs.NewMem(), newTestClock(), nil)
			f.seedRun("R", 0)
			r, err := f.eng.Submit(context.Background(), Request{Principal: events.WorkerPrincipal("R", "02_exec"),
				Actor: worker("02_exec"), Command: &DelegateRequest{RunID: "R", TaskID: "02_exec", Prompt: "p"}})
			require.NoError(t, err)
			require.Nil(t, r.Rejected)
			sub := r.Value.(*DelegateResult).GrandchildTaskRef
			settle := func(c *DelegateSettle) Reply {
				c.SubID = sub
				r, err := f.eng.Submit(context.Background(), Request{Principal: events.OrchestratorPrincipal("R"),
					CommandID: "settle-1", Actor: orchestrator, Command: c})
				require.NoError(t, err)
				return r
			}
			first := settle(tc.first)
			require.Nil(t, first.Rejected)
			again := settle(tc.then)
			if tc.reused {
				require.Equal(t, reusedID(), again.Rejected)
				return
			}
			require.Nil(t, again.Rejected, "the retry is answered the recorded outcome")
			require.True(t, again.Replayed)
			require.JSONEq(t, string(first.Result), string(again.Result))
		})
	}
}

// TestACutResultsNoteTakesNoRoomOfItsOwn: the broker cuts a settle's text so that the result's message fits in a page
// of its frame, and the note of that cut follows the fence: the text is cut further by what the note takes, so that
// the body takes no more bytes in JSON than the fence of the text as the broker cut it. A text cut shorter than the
// note (every text in a frame under about 1.6 KiB) was emptied and the note added all the same, a body wider than
// the fence of the cut, and the message outgrew its page (read without its body, textsOmitted): such a text is
// delivered as cut, without the note.
func TestACutResultsNoteTakesNoRoomOfItsOwn(t *testing.T) {
	rest := strings.Repeat("x", 2000) // what the cut left out: the note names 2000 to 2500 chars, four digits
	noteBytes := jsonBytes(cutNote(rest))
	for _, text := range []string{strings.Repeat("<", 500), strings.Repeat("a", 500), strings.Repeat("é", 500),
		strings.Repeat("<", 10), "", "done", strings.Repeat("a", noteBytes-1), strings.Repeat("a", noteBytes),
		strings.Repeat("a", noteBytes+1), strings.Repeat("<", noteBytes/6+1)} {
		c := &DelegateSettle{SubID: "gc-1", Outcome: OutcomeOK, Text: text, SentText: text + rest}
		body := c.resultBody("gc-1")
		require.LessOrEqual(t, jsonBytes(body), jsonBytes(ResultBody("gc-1", OutcomeOK, text)), "%q", text)
		if jsonBytes(text) < noteBytes {
			require.Equal(t, ResultBody("gc-1", OutcomeOK, text), body, "no room for the note: the text as cut")
			continue
		}
		require.Contains(t, body, fmt.Sprintf("--- end delegate gc-1 ---\n"+
			"[the result was cut to fit a frame: its text had %d chars]", utf8.RuneCountInString(c.SentText)))
	}
}
