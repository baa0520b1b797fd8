package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"runtime/pprof"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// Main is crewbench: it parses args, runs the subcommand and returns the exit
// status (0 ok, 1 failure, 2 usage).
func Main(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if status, ok := SocketServerChild(os.Stdin, stdout, stderr); ok {
		return status
	}
	if status, ok := PrecheckChild(stdout, stderr); ok {
		return status
	}
	if p := os.Getenv(benchProfileEnv); p != "" {
		stop, err := startCPUProfile(p)
		if err != nil {
			fmt.Fprintln(stderr, "crewbench:", err)
			return 1
		}
		defer stop()
	}
	root := &cobra.Command{
		Use:           "crewbench",
		Short:         "Measure crewlog against its alternatives, drive a running crewd with a simulated crew, and measure crewd on a long history",
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.SetOut(stdout)
	root.SetErr(stderr)
	root.SetArgs(args)
	root.AddCommand(compareCommand(stdout, stderr), simCommand(stdout), historyCommand(stdout, stderr))
	err := root.ExecuteContext(ctx)
	var u usageError
	switch {
	case err == nil:
		return 0
	case errors.As(err, &u):
		fmt.Fprintln(stderr, "crewbench:", err)
		return 2
	default:
		fmt.Fprintln(stderr, "crewbench:", err)
		return 1
	}
}

// benchProfileEnv, when set, names a file crewbench writes its own CPU profile
// to: in the socket cell, the clients' costs without the server's.
const benchProfileEnv = "CREWBENCH_CPUPROFILE"

func startCPUProfile(path string) (stop func(), err error) {
	f, err := os.Create(path)
	if err != nil {
		return nil, err
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		return nil, errors.Join(err, f.Close())
	}
	return func() { pprof.StopCPUProfile(); f.Close() }, nil
}

type usageError struct{ error }

var errBadSimFlags = errors.New("--duration, --runs and --workers must be positive")

func compareCommand(stdout, stderr io.Writer) *cobra.Command {
	var o CompareOptions
	var out string
	c := &cobra.Command{
		Use:   "compare",
		Short: "Time one delegate-admission workload on crewlog and its alternatives; print a markdown table",
		Long: `compare runs the same workload — a delegate admission: read the run's state, check slots and budget,
append three events atomically, then its settlement — on the physical limit (a preallocated file +
fdatasync), plain Pebble, crewlog in-process, over its socket and as the writer of a NATS JetStream
cluster (R1 and R3 on loopback), SQLite and NATS JetStream each behind the same group committer and in their
naive forms, and pi-crew's files, at each client count with all clients on
one run and each on its own. Each implementation must first pass the pre-check (sequential and 8 concurrent
clients, payloads read back, sync calls counted under strace), or it is reported and not timed.
Ratios are taken within a round and summarised over rounds as median (min–max).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := profileFlagsErr(cmd.Flags(), o); err != nil {
				return usageError{err}
			}
			if o.Duration <= 0 {
				return usageError{fmt.Errorf("--duration must be positive")}
			}
			if o.Rounds < 1 {
				return usageError{fmt.Errorf("--rounds must be at least 1, got %d", o.Rounds)}
			}
			if o.Load.Rate < 0 {
				return usageError{fmt.Errorf("--rate must not be negative")}
			}
			o.Progress = stderr
			o.Command = "crewbench compare"
			cmd.Flags().Visit(func(f *pflag.Flag) {
				if f.Name != "out" && f.Name != "dir" && f.Name != "profile" && f.Name != "profile-impl" {
					o.Command += fmt.Sprintf(" --%s %s", f.Name, strings.Trim(f.Value.String(), "[]"))
				}
			})
			cmp, err := Compare(cmd.Context(), o)
			if err != nil {
				return err
			}
			w := stdout
			if out != "" {
				f, err := os.Create(out)
				if err != nil {
					return err
				}
				defer f.Close()
				w = f
			}
			return cmp.WriteMarkdown(w)
		},
	}
	f := c.Flags()
	f.DurationVar(&o.Duration, "duration", 5*time.Second, "measured window per cell")
	f.IntSliceVar(&o.Clients, "clients", []int{1, 8, 64}, "concurrent clients per cell (1..64)")
	f.StringSliceVar(&o.Only, "only", nil, "only these implementations ("+strings.Join(implNames(), ", ")+
		"; default all but the optional crewlog-noid, crewlog-jetstream-r3-early and jetstream-async)")
	f.StringVar(&o.Dir, "dir", "", "directory for the stores (default: a temporary one, removed after)")
	f.StringVar(&out, "out", "", "write the markdown table to this file instead of stdout")
	f.IntVar(&o.Rounds, "rounds", 3,
		"rounds of the whole matrix, at least 1, implementation order rotated; medians and ranges over rounds")
	f.StringVar(&o.Profile.Prefix, "profile", "", "write a CPU and an allocation profile of each timed cell of one "+
		"implementation to PREFIX-<impl>-<n>.cpu.pprof, .allocs.pprof and .allocs-base.pprof (the allocations "+
		"before the cell: pass it to pprof's -base); for socket, the server process's too, as "+
		"PREFIX-socket-<n>.server.cpu.pprof and so on")
	f.StringVar(&o.Profile.Impl, "profile-impl", reference,
		"the implementation --profile profiles: one of those compared (--only)")
	f.BoolVar(&o.Profile.Trace, "trace", false, "with --profile, also write an execution trace of each profiled "+
		"cell to PREFIX-<impl>-<n>.trace (go tool trace; -pprof=sched: where goroutines waited for a processor); "+
		"it traces this process only: for socket, the clients, not the server")
	f.Float64Var(&o.Load.Rate, "rate", 0, "open loop: operations per second scheduled at fixed times, latency from "+
		"the scheduled time (0: closed loop)")
	return c
}

// profileFlagsErr refuses a profile compare would not write: --profile-impl or --trace without --profile, or an
// implementation --profile-impl names that is not compared. Each would leave a run of the whole matrix with no
// profile, found out only at its end.
func profileFlagsErr(flags *pflag.FlagSet, o CompareOptions) error {
	if o.Profile.Prefix == "" {
		if flags.Changed("profile-impl") || o.Profile.Trace {
			return errors.New("--profile-impl and --trace apply only with --profile")
		}
		return nil
	}
	impls, err := selectImpls(o.Only)
	if err != nil {
		return nil // Compare names the unknown implementation
	}
	names := make([]string, len(impls))
	for i, im := range impls {
		names[i] = im.Name
	}
	if !slices.Contains(names, o.Profile.Impl) {
		return fmt.Errorf("--profile-impl %q is not among the implementations compared (%s)", o.Profile.Impl,
			strings.Join(names, ", "))
	}
	return nil
}
