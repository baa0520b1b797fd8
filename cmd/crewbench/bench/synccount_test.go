package bench

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestCountSyncs: of the sync calls in the phase's window, only those that returned 0 on a path of the store count,
// whether strace wrote a call on one line or split it around another thread's.
func TestCountSyncs(t *testing.T) {
	trace := strings.Join([]string{
		`10 fdatasync(7</d/store/events.log>) = 0`, // before the phase
		`10 faccessat2(AT_FDCWD, "/crewbench-phase-begin", F_OK, 0) = -1 ENOENT (No such file or directory)`,
		`10 fdatasync(7</d/store/events.log>) = 0`,                           // counts
		`11 fsync(8</d/store>) = 0`,                                          // the store's directory: counts
		`12 fdatasync(9</d/store/crewlog/000002.log> <unfinished ...>`,       // counts once resumed with 0
		`10 fdatasync(7</d/store/events.log>) = -1 EIO (Input/output error)`, // failed
		`13 fsync(5</d/store-other/x> <unfinished ...>`,                      // another directory
		`12 <... fdatasync resumed>) = 0`,
		`13 <... fsync resumed>) = 0`,
		`10 fdatasync(-1) = -1 EBADF (Bad file descriptor)`,
		`10 fdatasync(3</d/elsewhere-1>) = 0`,
		`14 fsync(4</d/store/MANIFEST> <unfinished ...>`,
		`14 <... fsync resumed>) = -1 EIO (Input/output error)`,
		`10 faccessat2(AT_FDCWD, "/crewbench-phase-end", F_OK, 0) = -1 ENOENT (No such file or directory)`,
		`10 fdatasync(7</d/store/events.log>) = 0`, // after the phase
	}, "\n")
	n, err := countSyncs(strings.NewReader(trace), "/d/store")
	require.NoError(t, err)
	require.EqualValues(t, 3, n)
	_, err = countSyncs(strings.NewReader(`10 fdatasync(7</d/store/events.log>) = 0`), "/d/store")
	require.Error(t, err, "a trace without the phase's markers")
}
