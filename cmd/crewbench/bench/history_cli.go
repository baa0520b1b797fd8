package bench

import (
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"time"

	"github.com/spf13/cobra"
)

var errHistoryData = errors.New("--data is required")

func historyCommand(stdout, stderr io.Writer) *cobra.Command {
	var (
		o           HistoryOptions
		mo          MeasureOptions
		onlyWrite   bool
		onlyMeasure bool
	)
	c := &cobra.Command{
		Use:   "history",
		Short: "Write a store of N events over R runs (A left active) through the engine, then measure crewd on it",
		Long: `history writes --events events over --runs runs into a new store in --data through commands.Engine in
process, with many concurrent submitters: each run is created with 4 tasks and their credentials, worked
through delegations (admitted, spawned, settled with a result message, every other one charged for usage above
its reservation, every tenth refused by the policy), asks, usage reports and messages to the run's inbox, then
completed — except the last --active runs, which are left running with a delegation in flight. Each
active run holds exactly --active-events events, the same steps whatever --events and --runs, so crewd's
active state is the same for every size of history; the finished runs share the rest. The finished runs'
events are spread over --span up to an hour before now, the active runs' work is in that last hour.

Then it measures crewd (--crewd) on the store: the time from exec to the first answered ping over --starts
starts, VmRSS once ready, the latency of the dashboard's queries for finished runs (admin, over the socket,
--calls each), VmHWM after them, and VmHWM again after writing over the socket until crewd takes a snapshot.
crewd runs with the engine config the history was written under, so starting it records nothing. The
active state crewd loaded (its snapshot's size, the runs, tasks, delegations and messages it holds) is read
after the timed starts and reported; the write phase, which adds events to the active runs, comes after the
start-up and memory figures.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if o.Dir == "" {
				return usageError{errHistoryData}
			}
			if err := historyFlagsErr(o, mo); err != nil {
				return usageError{err}
			}
			if o.Runs < 1 || o.Active < 0 || o.Active >= o.Runs {
				return usageError{errHistoryShape}
			}
			o.Progress, mo.Progress = stderr, stderr
			rep := HistoryReport{Events: o.Events, Runs: o.Runs, Active: o.Active}
			if !onlyMeasure {
				st, err := WriteHistory(cmd.Context(), o)
				if err != nil {
					return err
				}
				rep.Written = st
				fmt.Fprintf(stderr, "history: wrote %d events in %s\n", st.Head, st.Elapsed)
			}
			if onlyWrite {
				return nil
			}
			if mo.Crewd == "" {
				mo.Crewd = findCrewd()
			}
			mo.Dir, mo.Runs, mo.Active = o.Dir, o.Runs, o.Active
			m, err := MeasureHistory(cmd.Context(), mo)
			if err != nil {
				return err
			}
			rep.Measure = m
			return rep.WriteMarkdown(stdout)
		},
	}
	f := c.Flags()
	f.Int64Var(&o.Events, "events", 1_000_000, "events in the store")
	f.IntVar(&o.Runs, "runs", 1000, "runs in the store")
	f.IntVar(&o.Active, "active", 10, "runs left running (the newest)")
	f.Int64Var(&o.ActiveEvents, "active-events", DefaultActiveEvents, fmt.Sprintf("events in each active run, "+
		"whatever --events and --runs, at least %d", minActiveEvents))
	f.StringVar(&o.Dir, "data", "", "crewd data directory to write the store into (its store/ must not exist)")
	f.IntVar(&o.Submitters, "submitters", 64, "concurrent submitters while writing, at least 1")
	f.DurationVar(&o.Span, "span", 7*24*time.Hour,
		"how far back the history's engine clock begins (it ends now), positive")
	f.StringVar(&mo.Crewd, "crewd", "", "the crewd binary (default: crewd next to crewbench, else on PATH)")
	f.IntVar(&mo.Starts, "starts", 3, "times crewd is started to time its start-up, at least 1")
	f.IntVar(&mo.Calls, "calls", 200, "calls of each query, at least 1")
	f.IntVar(&mo.Write, "write", -1,
		"events to write over the socket after the queries (-1: enough for crewd to snapshot)")
	f.BoolVar(&onlyWrite, "write-only", false, "write the store, do not measure")
	f.BoolVar(&onlyMeasure, "measure-only", false,
		"measure the store already in --data (written with the same --runs and --active)")
	return c
}

// findCrewd is crewd next to this executable, else the one on PATH, else
// plain "crewd" (starting it then fails with a clear error).
func findCrewd() string {
	if exe, err := os.Executable(); err == nil {
		p := filepath.Join(filepath.Dir(exe), "crewd")
		if _, err := os.Stat(p); err == nil {
			return p
		}
	}
	if p, err := exec.LookPath("crewd"); err == nil {
		return p
	}
	return "crewd"
}

// historyFlagsErr refuses the counts and span history cannot use. WriteHistory and MeasureHistory take a zero one
// for their default; given on the command line it is a mistake, and the history written would not be the one asked
// for.
func historyFlagsErr(o HistoryOptions, mo MeasureOptions) error {
	switch {
	case o.Submitters < 1:
		return fmt.Errorf("--submitters must be at least 1, got %d", o.Submitters)
	case o.Span <= 0:
		return fmt.Errorf("--span must be positive, got %s", o.Span)
	case o.ActiveEvents < minActiveEvents:
		return fmt.Errorf("--active-events must be at least %d, got %d", minActiveEvents, o.ActiveEvents)
	case mo.Starts < 1:
		return fmt.Errorf("--starts must be at least 1, got %d", mo.Starts)
	case mo.Calls < 1:
		return fmt.Errorf("--calls must be at least 1, got %d", mo.Calls)
	case mo.Write < -1:
		return fmt.Errorf("--write must be -1 or more, got %d", mo.Write)
	}
	return nil
}
