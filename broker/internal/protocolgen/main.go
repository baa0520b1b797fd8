// Command protocolgen writes docs/protocol.json, the machine-readable protocol description (broker.Describe).
// Run it with `go generate ./broker`; broker's TestProtocolJSONCurrent fails when the file is stale.
package main

import (
	"flag"
	"fmt"
	"os"

	"github.com/crewlog/crewlog/broker"
)

func main() {
	out := flag.String("out", "docs/protocol.json", "file to write")
	flag.Parse()
	b, err := broker.ProtocolJSON()
	if err == nil {
		err = os.WriteFile(*out, b, 0o644)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "protocolgen:", err)
		os.Exit(1)
	}
}
