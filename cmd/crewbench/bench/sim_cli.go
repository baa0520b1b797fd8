package bench

import (
	"fmt"
	"io"
	"path/filepath"
	"time"

	"github.com/spf13/cobra"

	"github.com/crewlog/crewlog/cmd/crewd/daemon"
)

func simCommand(stdout io.Writer) *cobra.Command {
	o := SimOptions{Out: stdout}
	var dashboard bool
	// The defaults are crewd's, so `crewd` then `crewbench sim` just works.
	if cfg, err := daemon.Load(nil, daemon.OSEnv()); err == nil {
		o.Socket, o.TokenFile = cfg.SocketPath, filepath.Join(cfg.DataDir, daemon.AdminTokenFile)
	}
	c := &cobra.Command{
		Use:   "sim",
		Short: "Drive a running crewd with a simulated crew and print a summary",
		Long: `sim connects to a running crewd as its admin and plays a crew: per run an orchestrator that creates the
run and its tasks, spawns and settles every admitted delegation (ok, failed, timed out, cancelled) and steers
its workers; workers that delegate with budgets, ask questions and message their parent; grandchildren that
sometimes delegate further. It prints progress every second and a summary: commands, events, rejections by
reason, latency percentiles. crewd ships with delegation and asks off, as pi-crew does: start it with
--nesting --max-depth=4 --wait-methods, or most of the crew's requests are refused.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if o.Duration <= 0 || o.Runs <= 0 || o.Workers <= 0 {
				return usageError{errBadSimFlags}
			}
			if dashboard {
				link, err := dashboardLink(cmd.Context(), o.Socket, o.TokenFile)
				if err != nil {
					return err
				}
				fmt.Fprintf(stdout, "dashboard: %s  (open it in a browser; the link works once)\n", link)
			}
			return Simulate(cmd.Context(), o)
		},
	}
	f := c.Flags()
	f.StringVar(&o.Socket, "socket", o.Socket, "the socket crewd listens on")
	f.StringVar(&o.TokenFile, "token-file", o.TokenFile, "the admin token file crewd wrote")
	f.IntVar(&o.Runs, "runs", 2, "runs worked on at once")
	f.IntVar(&o.Workers, "workers", 4, "worker tasks per run")
	f.DurationVar(&o.Duration, "duration", 20*time.Second, "how long the crew works before winding down")
	f.Uint64Var(&o.Seed, "seed", 0, "random seed (0: random; the summary names it)")
	f.BoolVar(&dashboard, "dashboard", false, "print a one-time login link to crewd's dashboard, asked through its "+
		"socket, before starting (opens nothing)")
	return c
}
