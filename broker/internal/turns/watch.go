package turns

import (
	"context"
	"fmt"
)

// watch tells its callers of the next change of the turns it belongs to, which guard it with their mutex: a caller
// takes next's channel, then reads the load, and waits on the channel only if the load is not yet what it wants.
type watch struct{ changed chan struct{} } // closed at the next change; nil while nobody watches

// next returns a channel closed at the next change. Under the owner's mutex.
func (w *watch) next() <-chan struct{} {
	if w.changed == nil {
		w.changed = make(chan struct{})
	}
	return w.changed
}

// notify wakes the watchers. Under the owner's mutex.
func (w *watch) notify() {
	if w.changed != nil {
		close(w.changed)
		w.changed = nil
	}
}

// awaitLoad waits until load is held and waiting, or ctx ends (its error, naming what). changed is the turns'
// Changed, load their load: a caller uses it to know that a taker is waiting, without sleeping.
func awaitLoad(ctx context.Context, what string, changed func() <-chan struct{}, load func() (int, int),
	held, waiting int) error {
	for {
		ch := changed()
		if h, w := load(); h == held && w == waiting {
			return nil
		}
		select {
		case <-ch:
		case <-ctx.Done():
			h, w := load()
			return fmt.Errorf("turns: %s: %d held and %d waiting, not %d and %d: %w", what, h, w, held, waiting,
				ctx.Err())
		}
	}
}
