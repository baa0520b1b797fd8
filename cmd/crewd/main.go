// Command crewd is the crewlog daemon: the event log, the single-writer engine and the broker on a unix socket.
// Run crewd --help for its flags; the logic lives in package daemon.
package main

import (
	"os"

	"github.com/crewlog/crewlog/cmd/crewd/daemon"
)

func main() { os.Exit(daemon.Main(os.Args[1:], os.Stdout, os.Stderr)) }
