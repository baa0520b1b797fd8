package brokertest

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// Recv is the next value on ch, failing t, naming what it awaited, if none comes within bound: a test that would
// hang then fails saying what never came, rather than by its package's timeout with a goroutine dump.
func Recv[T any](t testing.TB, ch <-chan T, bound time.Duration, what string) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(bound):
		require.FailNow(t, fmt.Sprintf("no %s within %s", what, bound))
		var zero T
		return zero
	}
}

// AwaitGroup waits for wg as Recv waits for a value. If it fails, wg's goroutines are left running: the test has
// failed, and they end with its process.
func AwaitGroup(t testing.TB, wg *sync.WaitGroup, bound time.Duration, what string) {
	t.Helper()
	done := make(chan struct{})
	go func() {
		wg.Wait()
		close(done)
	}()
	Recv(t, done, bound, what)
}
