package natslog

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/nats-io/nats.go/jetstream"
)

// ConfirmHead is the writer's barrier for a group that appends nothing: it returns nil once the stream is known to
// have held nothing the local copy does not hold at a moment after it was called, so that answers decided on the
// copy's state (refusals, no-ops, recorded outcomes) are answers of the stream's state then; ErrFenced when another
// writer appended since the copy's last sequence; another error when it cannot tell, within the publish timeout.
//
// NB: a group that appends is fenced by its batch's expected last sequence, and a group that appends nothing meets
// no fence: a writer whose lease another crewd took, and that has not learnt it yet (it renews every TTL/4 and stops
// only at 3/4 of the TTL), would answer it from a state behind the new writer's ("run not found" for a run the new
// writer created). So the stream's last sequence is read from the stream's leader and compared with the copy's:
//
//   - equal: nobody appended;
//   - larger: only this writer's own next group, staged after the one being confirmed (the engine's pipeline), may
//     be there, and then it holds the message after the copy's last: a batch of this Log (its id's random prefix) is
//     stored there only by a fence equal to the copy's last sequence, so the stream held nothing more just before it
//     was stored, after the group being confirmed was decided. One more read, a direct get of that one message.
//     Anything else there is another writer's: ErrFenced;
//   - smaller: the answer does not hold what this writer committed (a replica answering for a leaderless group):
//     asked again, as is an answer without a leader.
//
// Call it on the goroutine that calls Wait, with no Wait running: the copy's last sequence does not move meanwhile.
func (l *Log) ConfirmHead() error {
	ctx, cancel := context.WithTimeout(context.Background(), l.cfg.publishTimeout())
	defer cancel()
	l.mu.Lock()
	last := l.last
	l.mu.Unlock()
	info, err := callAgainWhile(ctx, func(err error) bool {
		return jetStreamUnavailable(err) || errors.Is(err, errNoLeaderAnswered)
	}, func(ctx context.Context) (*jetstream.StreamInfo, error) {
		info, err := l.stream.Info(ctx)
		switch {
		case err != nil:
			return nil, err
		case info.Cluster != nil && info.Cluster.Leader == "", info.State.LastSeq < last:
			return nil, fmt.Errorf("%w: the stream ends at sequence %d, the copy at %d", errNoLeaderAnswered,
				info.State.LastSeq, last)
		}
		return info, nil
	})
	if err != nil {
		return fmt.Errorf("natslog: confirm that the stream ends where the copy does: %w", err)
	}
	if info.State.LastSeq == last {
		return nil
	}
	batch, err := batchAt(ctx, l.stream, l.cfg, last+1)
	if err != nil {
		return fmt.Errorf("natslog: confirm that the stream ends where the copy does: %w", err)
	}
	if !strings.HasPrefix(batch, l.batchID+"-") {
		return fmt.Errorf("%w: sequence %d holds batch %q, the copy ends at %d", ErrFenced, last+1, batch, last)
	}
	return nil
}

// errNoLeaderAnswered is why ConfirmHead asks the stream again: the answer came from no leader, or from a replica
// that has not applied what this writer committed.
var errNoLeaderAnswered = errors.New("natslog: the stream's answer is not its leader's")
