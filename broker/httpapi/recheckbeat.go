package httpapi

import (
	"sync"
	"time"
)

// recheckBeat wakes every stream that waits with nothing to send, all at once, every credentialRecheck, so that each
// looks at its credential again: one timer for all of them, where a ticker per stream woke the process once per
// stream per second (BenchmarkIdleStreams: 512 idle streams of a read-only token cost 2.8–4.0 % of a core so,
// 1.0–1.3 % with the beat, 0.8–1.1 % looking only at their keep-alives). It is armed only while a stream waits on
// it: once none waits, the last timer set fires once more and none is set again. Close stops none: a beat that
// comes after it closes a channel nobody waits on.
type recheckBeat struct {
	mu sync.Mutex
	ch chan struct{} // closed at the next beat; nil while nobody waits
	// arm sets the timer of the next beat: time.AfterFunc, or a test's hook that calls beat when the test says.
	arm func(d time.Duration, beat func())
}

// wait returns a channel closed at the next beat, arming it if nobody waited yet.
func (b *recheckBeat) wait() <-chan struct{} {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.ch == nil {
		b.ch = make(chan struct{})
		if b.arm != nil {
			b.arm(credentialRecheck, b.beat)
		} else {
			time.AfterFunc(credentialRecheck, b.beat)
		}
	}
	return b.ch
}

// beat wakes every stream waiting for it; the next to wait arms the next beat.
func (b *recheckBeat) beat() {
	b.mu.Lock()
	ch := b.ch
	b.ch = nil
	b.mu.Unlock()
	if ch != nil {
		close(ch)
	}
}
