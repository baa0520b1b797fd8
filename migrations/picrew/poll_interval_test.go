package picrew

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestTheFollowerPollsOnceASecondOrFourTimesWithoutNotifications: docs/picrew.md's intervals. With notifications a
// follower still looks at every run once a second (a change a notification missed); without them (none available, a
// watch limit reached, or turned off) its poll is all it has, four times a second. Poll, when set, is both.
func TestTheFollowerPollsOnceASecondOrFourTimesWithoutNotifications(t *testing.T) {
	for name, c := range map[string]struct {
		poll     time.Duration
		notified bool
		want     time.Duration
	}{
		"notifications":             {notified: true, want: time.Second},
		"no notifications":          {want: 250 * time.Millisecond},
		"Poll set, notifications":   {poll: 40 * time.Millisecond, notified: true, want: 40 * time.Millisecond},
		"Poll set, no notification": {poll: 3 * time.Second, want: 3 * time.Second},
	} {
		f := NewFollower(t.TempDir(), newMemSink(), &FollowOptions{Poll: c.poll})
		require.Equal(t, c.want, f.poll(c.notified), name)
	}
}
