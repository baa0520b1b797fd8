// Command crewctl inspects and operates a crewlog store: offline replay,
// explanation and verification of the log, live views over the daemon's
// socket, backup and restore. Run crewctl --help for the command tree.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], stdio{out: os.Stdout, err: os.Stderr}, dialBroker)
	stop()
	os.Exit(code)
}
