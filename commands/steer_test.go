package commands

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/crewlog/crewlog/events"
	"github.com/crewlog/crewlog/projections"
)

func TestSteerPush(t *testing.T) {
	id := fxMsgID("steer", 1)
	for _, tc := range []struct {
		name, priority, want string
	}{
		{"priority defaults to urgent", "", events.PriorityUrgent},
		{"priority kept", events.PriorityLow, events.PriorityLow},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l := fxRunning(t, 0)
			body := "focus on the API\n\tthen tests\r\n"
			dec, err := fxDecide(t, l.s, &SteerPush{RunID: fxRun, TaskID: "02_exec", Body: body,
				Priority: tc.priority})
			require.NoError(t, err)
			fxRequireEvents(t, dec.Events,
				fxE{events.TypeMailboxAppended, &events.MailboxAppended{ID: id, To: "02_exec", From: "orchestrator",
					Kind: events.KindSteer, Priority: tc.want, DeliveryMode: events.DeliveryInterrupt, Body: body}},
				fxE{events.TypeSteerPushed, &events.SteerPushed{TaskID: "02_exec", MessageID: id}})
			require.Equal(t, SteerResult{MessageID: id, TaskID: "02_exec", Durable: true}, dec.Result)
			l.apply(dec)
			m, ok := l.s.Message(fxRun, id)
			require.True(t, ok)
			require.Equal(t, projections.MessageQueued, m.Status)
		})
	}
}

func TestSteerPushRejections(t *testing.T) {
	l := fxRunning(t, 0)
	for _, tc := range []struct {
		name, task, body, priority string
		code, reason, text         string
	}{
		{"empty", "02_exec", "", "", CodeBadParams, "invalid-params", "must not be empty"},
		{"blank", "02_exec", " \n\t ", "", CodeBadParams, "invalid-params", "must not be empty"},
		{"4097 chars", "02_exec", strings.Repeat("é", MaxSteerChars+1), "", CodeBadParams, "invalid-params",
			"at most 4096 chars"},
		// D§7.5: pi-crew's steer.push refuses a body over 256 Ki chars oversize-frame, as msg.send and escalate do,
		// before its sanitiser; only a frame cap above the default carries one.
		{"256 Ki chars", "02_exec", strings.Repeat("é", MaxBodyChars), "", CodeBadParams, "invalid-params",
			"at most 4096 chars"},
		{"over 256 Ki chars", "02_exec", strings.Repeat("é", MaxBodyChars+1), "", CodeOversizeFrame,
			"body-too-large", "steer.push: body too large"},
		{"over 256 Ki chars, a control character too", "02_exec", "\x1b" + strings.Repeat("é", MaxBodyChars), "",
			CodeOversizeFrame, "body-too-large", "steer.push: body too large"},
		{"51 newlines", "02_exec", "a" + strings.Repeat("\n", MaxSteerNewlines+1), "", CodeBadParams,
			"invalid-params", "at most 50 newlines"},
		{"NUL", "02_exec", "a\x00b", "", CodeBadParams, "invalid-params", "control characters"},
		{"ESC", "02_exec", "\x1b[2Jgo", "", CodeBadParams, "invalid-params", "control characters"},
		{"DEL", "02_exec", "a\x7f", "", CodeBadParams, "invalid-params", "control characters"},
		{"C1", "02_exec", "a\u0085", "", CodeBadParams, "invalid-params", "control characters"},
		{"invalid UTF-8", "02_exec", "a\xff", "", CodeBadParams, "invalid-params", "UTF-8"},
		{"priority", "02_exec", "go", "asap", CodeBadParams, "invalid-params", "priority"},
		{"no task", "99_x", "go", "", CodeNoTask, "no-task", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dec, err := fxDecide(t, l.s, &SteerPush{RunID: fxRun, TaskID: tc.task, Body: tc.body,
				Priority: tc.priority})
			fxRejected(t, dec, err, tc.code, tc.reason, tc.text)
		})
	}
	t.Run("exactly at the limits", func(t *testing.T) {
		body := strings.Repeat("\n", MaxSteerNewlines) + strings.Repeat("x", MaxSteerChars-MaxSteerNewlines)
		_, err := fxDecide(t, l.s, &SteerPush{RunID: fxRun, TaskID: "02_exec", Body: body})
		require.NoError(t, err)
	})
	t.Run("no run", func(t *testing.T) {
		dec, err := fxDecide(t, l.s, &SteerPush{RunID: "nope", TaskID: "02_exec", Body: "go"})
		fxRejected(t, dec, err, CodeNoManifest, "no-manifest", "")
	})
}
