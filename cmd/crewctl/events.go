package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/crewlog/crewlog/audit"
	"github.com/crewlog/crewlog/events"
)

// teamEvent is the part of the broker's event encoding crewctl shows.
type teamEvent struct {
	Time     string          `json:"time"`
	Type     string          `json:"type"`
	RunID    string          `json:"runId"`
	TaskID   string          `json:"taskId,omitempty"`
	Data     json.RawMessage `json:"data"`
	Metadata struct {
		Seq      uint64       `json:"seq"`
		Position uint64       `json:"position"`
		Actor    events.Actor `json:"actor"`
		// Omitted: crewd left the data out, the event being too large for its frame.
		Omitted bool `json:"omitted"`
		// Imported: an event an import kept as it was (foreign.imported) is shown with its source's type, and this
		// holds the type the log stored.
		Imported *struct {
			Type string `json:"type"`
		} `json:"imported"`
	} `json:"metadata"`
}

// storedType is te's type as the log stored it: foreign.imported for an event an import kept as it was.
func (te teamEvent) storedType() string {
	if te.Metadata.Imported != nil {
		return te.Metadata.Imported.Type
	}
	return te.Type
}

func (a *app) eventsCmd() *cobra.Command {
	var run string
	var types []string
	var follow bool
	var since uint64
	c := &cobra.Command{
		Use:   "events --run ID",
		Short: "Print a run's events; --follow tails them live (events.since, events.subscribe)",
		Long: `events pages through a run's events (events.since) and, with --follow, keeps
printing new ones as they commit (events.subscribe), resuming by itself after a
resync frame. With --json each event is one JSON line, as the broker sends it.`,
		Args: runFlagOnly("events"),
		RunE: func(cmd *cobra.Command, _ []string) error {
			if run == "" {
				return usagef("events: name the run with --run (events are per run)")
			}
			return a.view(cmd.Context(), func(b Broker) error {
				return a.events(cmd.Context(), b, run, since, types, follow)
			})
		},
	}
	c.Flags().StringVar(&run, "run", "", "the run")
	c.Flags().StringSliceVar(&types, "type", nil,
		"only these event types (repeat or comma-separate), as the log stores them: an imported one's is foreign.imported")
	c.Flags().BoolVar(&follow, "follow", false, "keep printing new events until interrupted")
	c.Flags().Uint64Var(&since, "since", 0, "start after this seq (the run's stream version)")
	return c
}

func (a *app) events(ctx context.Context, b Broker, run string, since uint64, types []string, follow bool) error {
	print := func(raw json.RawMessage) error {
		if a.json {
			return machineLine(a.io.out, compact(raw))
		}
		return printEvent(a.stdout(), raw)
	}
	for {
		var page sincePage
		if err := call(ctx, b, "events.since", map[string]any{"runId": run, "sinceSeq": since}, &page); err != nil {
			return err
		}
		for _, raw := range page.Events {
			if typeIn(raw, types) {
				if err := print(raw); err != nil {
					return problemf("%v", err)
				}
			}
		}
		// NB: a page that says there is more and moves on by nothing would be asked for again without end.
		if page.HasMore && page.NextSeq <= since {
			return problemf("events.since: the daemon's page after seq %d moved on by nothing (nextSeq %d)", since,
				page.NextSeq)
		}
		since = page.NextSeq
		if !page.HasMore {
			break
		}
	}
	if !follow {
		return nil
	}
	st, err := b.Subscribe(ctx, run, since, types)
	if err != nil {
		return brokerErr("events.subscribe", err)
	}
	defer st.Close()
	for {
		raw, err := st.Next(ctx)
		if err != nil {
			if errors.Is(err, context.Canceled) || ctx.Err() != nil {
				return nil // interrupted: the normal end of a tail
			}
			return openErr(fmt.Errorf("crewctl: events.subscribe: %w", err))
		}
		if err := print(raw); err != nil {
			return problemf("%v", err)
		}
	}
}

func compact(raw json.RawMessage) []byte {
	var b bytes.Buffer
	if err := json.Compact(&b, raw); err != nil {
		return raw
	}
	return b.Bytes()
}

// printEvent prints one line: seq, position, time, actor, type and what it
// meant (the payload decoded into its type and described as replay does).
func printEvent(w screen, raw json.RawMessage) error {
	var te teamEvent
	if err := json.Unmarshal(raw, &te); err != nil {
		return fmt.Errorf("crewctl: undecodable event: %w", err)
	}
	meaning := te.Type
	switch p := events.NewPayload(te.Type); {
	case te.Metadata.Omitted:
		// NB: its data is null, which decodes into an empty payload: described, an event whose fields are all empty.
		meaning = omitted(te)
	case p != nil && json.Unmarshal(te.Data, p) == nil:
		meaning = audit.Describe(events.Event{Type: te.Type, Stream: te.RunID, Payload: p})
	}
	at := te.Time
	if t, err := time.Parse(time.RFC3339Nano, te.Time); err == nil {
		at = t.UTC().Format(time.RFC3339)
	}
	return w.printf("%d\t#%d\t%s\t%s\t%s\t%s\n", te.Metadata.Seq, te.Metadata.Position, at,
		te.Metadata.Actor.String(), te.Type, meaning)
}

// omitted says what is known of an event crewd sent without its data: its task, when it has one.
func omitted(te teamEvent) string {
	const why = "data omitted: the event does not fit in crewd's frame (--max-frame)"
	if te.TaskID == "" {
		return why
	}
	return "task " + te.TaskID + ": " + why
}
