package migrations

import (
	"fmt"
	"time"

	"github.com/crewlog/crewlog/eventlog"
	"github.com/crewlog/crewlog/events"
)

// Options tune Run; nil means defaults.
type Options struct {
	// DryRun reports the pending steps without running them.
	DryRun bool
	// Now stamps the store.migrated events (default time.Now).
	Now func() time.Time
	// Progress, when set, is called now and then during a step with a
	// position reached and the log's head.
	Progress func(m Migration, done, total uint64)
}

// Applied is one step Run took (or, with DryRun, would take).
type Applied struct {
	From     uint32 `json:"from"`
	To       uint32 `json:"to"`
	Name     string `json:"name"`
	Doc      string `json:"doc"`
	Changed  int    `json:"changed"`            // keys the step wrote
	Position uint64 `json:"position,omitempty"` // of its store.migrated event
}

// Report is what Run did.
type Report struct {
	From    uint32    `json:"from"` // the store's format before
	To      uint32    `json:"to"`   // and after
	DryRun  bool      `json:"dryRun"`
	Applied []Applied `json:"applied"`
}

// Run brings the store up to eventlog.CurrentFormat, one step at a time,
// recording each step as a store.migrated event in the step's final batch.
// l must be opened with eventlog.Options.AllowOlderFormat (or read-only for
// a dry run). On a current store it writes nothing. On an error the store
// is at the format of the last completed step; running again resumes.
func Run(l *eventlog.Log, opts *Options) (Report, error) {
	var o Options
	if opts != nil {
		o = *opts
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	format, err := l.Format()
	if err != nil {
		return Report{}, fmt.Errorf("migrations: %w", err)
	}
	rep := Report{From: format, To: format, DryRun: o.DryRun, Applied: []Applied{}}
	pending, err := Pending(format)
	if err != nil {
		return rep, fmt.Errorf("migrations: %w", err)
	}
	for _, m := range pending {
		a := Applied{From: m.From, To: m.To, Name: m.Name, Doc: m.Doc}
		if o.DryRun {
			rep.Applied = append(rep.Applied, a)
			rep.To = m.To
			continue
		}
		w, err := record(m, o.Now())
		if err != nil {
			return rep, err
		}
		var uo eventlog.UpgradeOptions
		if o.Progress != nil {
			uo.Progress = func(done, total uint64) { o.Progress(m, done, total) }
		}
		step := func(u *eventlog.Upgrade) error {
			n, err := m.Step(u)
			a.Changed = n
			return err
		}
		if err := l.Upgrade(m.From, m.To, step, &uo, w); err != nil {
			return rep, fmt.Errorf("migrations: step %d → %d %s: %w", m.From, m.To, m.Name, err)
		}
		a.Position = w.Events[0].Position
		rep.Applied = append(rep.Applied, a)
		rep.To = m.To
	}
	return rep, nil
}

// record is the store.migrated write of step m.
func record(m Migration, now time.Time) (eventlog.Write, error) {
	p, err := events.EncodePayload(&events.StoreMigrated{From: m.From, To: m.To, Name: m.Name})
	if err != nil {
		return eventlog.Write{}, fmt.Errorf("migrations: %w", err)
	}
	return eventlog.Write{
		Principal: events.EnginePrincipal().Key(),
		CommandID: m.CommandID(),
		Events: []eventlog.Event{{
			Stream: events.EngineStream, Type: events.TypeStoreMigrated,
			SchemaVersion: events.SchemaVersion(events.TypeStoreMigrated),
			Time:          now.UnixNano(), ActorRole: events.RoleEngine, Payload: p,
		}},
	}, nil
}
