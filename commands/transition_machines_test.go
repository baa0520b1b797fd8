package commands

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/crewlog/crewlog/events"
	"github.com/crewlog/crewlog/projections"
)

var (
	runStatuses = []projections.RunStatus{projections.RunQueued, projections.RunPlanning, projections.RunRunning,
		projections.RunBlocked, projections.RunCompleted, projections.RunFailed, projections.RunCancelled}
	taskStatuses = []projections.TaskStatus{projections.TaskQueued, projections.TaskRunning,
		projections.TaskWaiting, projections.TaskCompleted, projections.TaskFailed, projections.TaskCancelled,
		projections.TaskSkipped, projections.TaskNeedsAttention}
)

// run.transition follows the D§2.2 machine over every pair of statuses: the same status again, and the edges
// below; any other is bad-params with nothing recorded. A terminal run leaves its status only to be reopened
// (→ running) or, completed or failed, cancelled.
func TestRunTransitionMachine(t *testing.T) {
	allowed := machine(`
		queued:    planning running cancelled failed
		planning:  running blocked cancelled failed
		running:   blocked completed failed cancelled
		blocked:   running cancelled failed
		completed: running cancelled
		failed:    running cancelled
		cancelled: running`)
	for _, from := range runStatuses {
		for _, to := range runStatuses {
			t.Run(string(from)+"→"+string(to), func(t *testing.T) {
				l := fxNew(t).add(events.TypeRunCreated, &events.RunCreated{Team: "t", Goal: "g", Cwd: "/w"})
				if from != projections.RunQueued {
					typ, _ := events.RunStatusType(string(from))
					l.add(typ, runStatusPayload(from, events.RunStatusChanged{}))
				}
				dec, err := fxDecide(t, l.s, &RunTransition{RunID: fxRun, To: string(to)})
				if to != from && !contains(allowed[string(from)], string(to)) {
					fxRejected(t, dec, err, CodeBadParams, "invalid-params", "cannot go from")
					return
				}
				require.NoError(t, err)
				l.apply(dec)
				run, _ := l.s.Run(fxRun)
				require.Equal(t, to, run.Status)
			})
		}
	}
}

// task.transition follows the D§2.4 machine over every pair of statuses, less its terminal → non-terminal edges
// but → queued (SPEC §4.4: only an explicit retry leaves a terminal status) and less → waiting / waiting → running,
// which are wait.request's and wait.resolve's; any other, the same status again included, is bad-params with
// nothing recorded.
func TestTaskTransitionMachine(t *testing.T) {
	allowed := machine(`
		queued:          running cancelled skipped failed
		running:         completed failed cancelled queued needs_attention
		waiting:         queued completed failed cancelled
		completed:       queued
		failed:          queued cancelled
		cancelled:       queued
		skipped:         queued cancelled
		needs_attention: queued`)
	for from, tos := range allowed {
		for _, to := range tos {
			from, to := projections.TaskStatus(from), projections.TaskStatus(to)
			require.False(t, from.Terminal() && !to.Terminal() && to != projections.TaskQueued,
				"%s → %s leaves a terminal status other than by a retry", from, to)
		}
	}
	for _, from := range taskStatuses {
		for _, to := range taskStatuses {
			t.Run(string(from)+"→"+string(to), func(t *testing.T) {
				l := fxRunning(t, 0)
				taskIn(l, "03_t", from)
				dec, err := fxDecide(t, l.s, &TaskTransition{RunID: fxRun, TaskID: "03_t", To: string(to)})
				if !contains(allowed[string(from)], string(to)) {
					fxRejected(t, dec, err, CodeBadParams, "invalid-params", "cannot go from")
					return
				}
				require.NoError(t, err)
				l.apply(dec)
				task, _ := l.s.Task(fxRun, "03_t")
				require.Equal(t, to, task.Status)
			})
		}
	}
}

// taskIn adds workflow task id to l in status st.
func taskIn(l *fxLog, id string, st projections.TaskStatus) {
	switch st {
	case projections.TaskQueued, projections.TaskRunning, projections.TaskWaiting, projections.TaskCompleted:
		l.task(id, st)
	case projections.TaskSkipped:
		l.task(id, projections.TaskQueued).add(events.TypeTaskSkipped, &events.TaskSkipped{TaskID: id})
	case projections.TaskFailed:
		l.task(id, projections.TaskRunning).add(events.TypeTaskFailed, &events.TaskFailed{TaskID: id})
	case projections.TaskCancelled:
		l.task(id, projections.TaskRunning).add(events.TypeTaskCancelled, &events.TaskCancelled{TaskID: id})
	case projections.TaskNeedsAttention:
		l.task(id, projections.TaskRunning).add(events.TypeTaskNeedsAttention,
			&events.TaskNeedsAttention{TaskID: id})
	}
	task, ok := l.s.Task(fxRun, id)
	require.True(l.t, ok)
	require.Equal(l.t, st, task.Status)
}

// machine reads a state machine written one status a line, "from: to to …", as the statuses each status may go to.
func machine(lines string) map[string][]string {
	m := map[string][]string{}
	for _, line := range strings.Split(strings.TrimSpace(lines), "\n") {
		from, tos, _ := strings.Cut(line, ":")
		m[strings.TrimSpace(from)] = strings.Fields(tos)
	}
	return m
}
