package brokertest

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// failures is a testing.TB that records its failures, and goes on after FailNow, so that a test can see them.
type failures struct {
	testing.TB
	messages []string
	failed   bool
}

func (f *failures) Helper() {}
func (f *failures) Errorf(format string, args ...any) {
	f.messages = append(f.messages, fmt.Sprintf(format, args...))
}
func (f *failures) FailNow() { f.failed = true }

func TestRecvReturnsTheValueSent(t *testing.T) {
	ch := make(chan int, 1)
	ch <- 7
	got := &failures{TB: t}
	require.Equal(t, 7, Recv(got, ch, time.Minute, "number"))
	require.False(t, got.failed)
}

// TestAWaitThatIsNeverAnsweredFailsNamingWhatItAwaited: Recv and AwaitGroup fail, once their bound passed, with a
// message naming what never came.
func TestAWaitThatIsNeverAnsweredFailsNamingWhatItAwaited(t *testing.T) {
	for _, tc := range []struct {
		name string
		wait func(t testing.TB)
	}{
		{"Recv", func(t testing.TB) { Recv(t, make(chan struct{}), time.Millisecond, "signal nobody sends") }},
		{"AwaitGroup", func(t testing.TB) {
			var wg sync.WaitGroup
			wg.Add(1)
			AwaitGroup(t, &wg, time.Millisecond, "signal nobody sends")
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := &failures{TB: t}
			tc.wait(got)
			require.True(t, got.failed)
			require.Len(t, got.messages, 1)
			require.Contains(t, got.messages[0], "no signal nobody sends within 1ms")
		})
	}
}
