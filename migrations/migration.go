package migrations

import (
	"fmt"

	"github.com/crewlog/crewlog/eventlog"
	"github.com/crewlog/crewlog/events"
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

// CommandID is the step's deterministic command id, the engine
// principal's: the outcome table then refuses a second record of the same
// step, and no client id can reach it.
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
	{
		From: eventlog.FormatStreamCatalog, To: eventlog.FormatPrincipalOutcomes, Name: "principal-outcomes",
		Doc: "key every recorded command outcome by its principal and command id: each outcome moves to the " +
			"principal its events name (the engine; a run's orchestrator; a worker of a task), or to the admin " +
			"when it wrote no events; moved outcomes have no fingerprint and answer any retry, as before",
		Step: func(u *eventlog.Upgrade) (int, error) { return u.MoveOutcomes(outcomePrincipal) },
	},
	{
		From: eventlog.FormatPrincipalOutcomes, To: eventlog.FormatChunkedSnapshots, Name: "chunked-snapshots",
		Doc: "store the snapshot in sealed chunks of 64 KiB under a header holding its size, chunk count and " +
			"checksum: a snapshot stored whole is rewritten in chunks (one that fails its checksum is dropped, " +
			"and the next start rebuilds from the log); the events are not touched",
		Step: func(u *eventlog.Upgrade) (int, error) { return u.ChunkSnapshots() },
	},
}

// outcomePrincipal is the principal an outcome recorded before format 3
// moves to: the one its first event names (events.EventPrincipal), or the
// admin when it wrote none. NB: an outcome without events (a rejection
// recorded with no event) does not say whose it was; the admin is the one
// principal that may send every command, so a retry by any other principal
// is decided afresh rather than answered with a record that may not be its
// own.
func outcomePrincipal(first *eventlog.Event) string {
	if first == nil {
		return events.AdminPrincipal().Key()
	}
	return events.EventPrincipal(first.ActorRole, first.Stream, first.ActorTask, first.CorrelationID).Key()
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
