package migrations

import (
	"fmt"

	"github.com/crewlog/crewlog/eventlog"
)

// Migration is one format step.
type Migration struct {
	From, To uint32
	// Name is stable: it is recorded in the store.migrated event and in the
	// step's command id.
	Name string
	// Doc says what the step does and why, for crewctl migrate --dry-run.
	Doc string
	// Step stages the step's writes. It must be idempotent: after a crash
	// it runs again over a store where some of its writes are already done.
	Step func(u *eventlog.Upgrade) (changed int, err error)
}

// CommandID is the step's deterministic command id: the command-id table
// then refuses a second record of the same step.
func (m Migration) CommandID() string { return fmt.Sprintf("migrate:%d:%s", m.To, m.Name) }

// all is every format step, in order. NB: never edit or remove a released
// step; a change of format is a new step at the end.
var all = []Migration{
	{
		From: eventlog.FormatInitial, To: eventlog.FormatStreamCatalog, Name: "stream-catalog",
		Doc: "backfill the stream catalog: one entry per run naming its first position and time, " +
			"so listing a store's runs does not scan the log",
		Step: func(u *eventlog.Upgrade) (int, error) { return u.BackfillStreamCatalog() },
	},
}

// List returns every format step, in order.
func List() []Migration { return append([]Migration(nil), all...) }

// Pending returns the steps a store at format must take to reach
// eventlog.CurrentFormat. A format newer than this build is an error
// wrapping eventlog.ErrFormatTooNew.
func Pending(format uint32) ([]Migration, error) {
	if format > eventlog.CurrentFormat {
		return nil, &eventlog.FormatError{Store: format, Supported: eventlog.CurrentFormat}
	}
	var out []Migration
	for _, m := range all {
		if m.From >= format {
			out = append(out, m)
		}
	}
	return out, nil
}
