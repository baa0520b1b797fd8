package audit

import (
	"github.com/crewlog/crewlog/eventlog"
)

// VerifyOptions tune Verify; nil means defaults.
type VerifyOptions struct {
	// Progress, when set, is called now and then with the events checked
	// and the durable head.
	Progress func(done, total uint64)
}

// VerifyReport is what Verify found: the store's integrity report and the
// invariant check over the same records.
type VerifyReport struct {
	Store eventlog.VerifyReport
	Check CheckReport
}

// Verify checks the store's integrity (eventlog.Log.Verify: checksums,
// positions, the hash chain, the stream index, the command table, the
// snapshot) and the domain invariants of Check in one pass over the log:
// the invariant fold consumes each record the integrity walk has just
// decoded and checked, instead of reading the log a second time.
//
// A damaged store is an error (it wraps eventlog.ErrCorrupt and names the
// first bad position when the damage is in a record); broken invariants
// are Problems of the report, as with Check.
func Verify(l *eventlog.Log, o *VerifyOptions) (VerifyReport, error) {
	c := newChecker()
	vo := &eventlog.VerifyOptions{Visit: c.visit}
	if o != nil {
		vo.Progress = o.Progress
	}
	rep, err := l.Verify(vo)
	if err != nil {
		return VerifyReport{Store: rep, Check: CheckReport{Events: c.events}}, err
	}
	return VerifyReport{Store: rep, Check: c.report()}, nil
}
