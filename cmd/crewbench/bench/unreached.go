package bench

import (
	"fmt"

	"github.com/crewlog/crewlog/broker/wire"
)

// unreachedErr is the error of an admin hello to crewd at socket, with the token of tokenFile, that failed with err. A
// hello crewd refuses as auth is, as a rule, another crewd's token: crewd started with --data DIR and crewbench run
// with the default --token-file, which is the default data directory's. The error names the file sent and the flag
// that chooses it, which a bare "hello rejected" leaves the operator to guess.
func unreachedErr(socket, tokenFile string, err error) error {
	if wire.CodeOf(err) == wire.CodeAuth {
		return fmt.Errorf("bench: crewd at %s refused the admin token in %s, most likely another crewd's: pass "+
			"--token-file with the admin.token of the data directory crewd was started on: %w", socket, tokenFile, err)
	}
	return fmt.Errorf("bench: connect to crewd at %s: %w", socket, err)
}
