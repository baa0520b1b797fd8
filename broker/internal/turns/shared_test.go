package turns

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// awaitShared waits until s is held and has waiting takers waiting, or fails.
func awaitShared(t *testing.T, s *Shared, held, waiting int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute) // a guard against a hang, not a timing
	defer cancel()
	require.NoError(t, s.AwaitLoad(ctx, held, waiting))
}

// TestSharedServesKeysInTurn: one key's queue of takers does not hold another key's taker behind all of them: the
// keys waiting are served round-robin, each key's takers in arrival order.
func TestSharedServesKeysInTurn(t *testing.T) {
	s := NewShared()
	first, err := s.Take(t.Context(), "flood")
	require.NoError(t, err)
	var flood []<-chan taken
	for range 3 {
		flood = append(flood, takeAsync(t.Context(), s, "flood"))
		awaitShared(t, s, 1, len(flood))
	}
	operator := takeAsync(t.Context(), s, "operator")
	awaitShared(t, s, 1, 4)

	served := []string{}
	next := func(holding func()) func() {
		holding()
		select {
		case tk := <-flood[0]:
			require.NoError(t, tk.err)
			flood = flood[1:]
			served = append(served, "flood")
			return tk.done
		case tk := <-operator:
			require.NoError(t, tk.err)
			served = append(served, "operator")
			return tk.done
		case <-time.After(time.Minute):
			t.Fatal("the turn given back was handed to nobody")
			return nil
		}
	}
	done := next(first)
	for range 3 {
		done = next(done)
	}
	done()
	require.Equal(t, []string{"flood", "operator", "flood", "flood"}, served,
		"the operator, come after three of the flood's takers, waits for one of them")
	require.Zero(t, s.Keys(), "nothing kept once idle")
	awaitShared(t, s, 0, 0)
	again, err := s.Take(t.Context(), "operator")
	require.NoError(t, err, "the turn is free")
	again()
	again() // a second give-back does nothing
	again2, err := s.Take(t.Context(), "x")
	require.NoError(t, err)
	again2()
}

// TestSharedTakerGivesUp: a taker whose context ends while it waits holds nothing and is forgotten; one whose
// context has ended is refused at once, even with the turn free.
func TestSharedTakerGivesUp(t *testing.T) {
	s := NewShared()
	_, err := s.Take(endedContext(t), "a")
	require.ErrorIs(t, err, context.Canceled)
	held, err := s.Take(t.Context(), "a")
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(t.Context())
	w := takeAsync(ctx, s, "b")
	awaitShared(t, s, 1, 1)
	cancel()
	require.ErrorIs(t, (<-w).err, context.Canceled)
	require.Zero(t, s.Keys())
	awaitShared(t, s, 1, 0)
	other := takeAsync(t.Context(), s, "c")
	awaitShared(t, s, 1, 1)
	held()
	tk := <-other
	require.NoError(t, tk.err, "the turn went to the taker still waiting")
	tk.done()
}

// TestSharedHandedWhileGivingUp: a taker handed the turn as its context ends hands it on to the next taker.
func TestSharedHandedWhileGivingUp(t *testing.T) {
	s := NewShared()
	held, err := s.Take(t.Context(), "a")
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(t.Context())
	giving := make(chan struct{})
	release := make(chan struct{})
	s.givingUp = func() { close(giving); <-release }
	w := takeAsync(ctx, s, "b")
	awaitShared(t, s, 1, 1)
	next := takeAsync(t.Context(), s, "c")
	awaitShared(t, s, 1, 2)
	cancel()
	<-giving
	held() // handed to b, which is giving up
	close(release)
	require.ErrorIs(t, (<-w).err, context.Canceled)
	tk := <-next
	require.NoError(t, tk.err, "b handed the turn on")
	tk.done()
	require.Zero(t, s.Keys())
	awaitShared(t, s, 0, 0)
}
