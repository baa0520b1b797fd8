// Command crewbench measures crewlog: `crewbench compare` times one delegate
// admission workload on crewlog and its alternatives, `crewbench sim` drives a
// running crewd with a simulated crew, and `crewbench history` writes a long
// history through the engine and measures crewd on it. The logic lives in
// package bench.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"github.com/crewlog/crewlog/cmd/crewbench/bench"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := bench.Main(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}
