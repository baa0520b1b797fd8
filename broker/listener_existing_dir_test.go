package broker

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/crewlog/crewlog/broker/brokertest"
)

// TestAnExistingSocketDirectoryIsTakenOnlyWhenItIsCrewdsAlone: a socket directory that exists must already be
// crewd's uid's, with the socket group when one is given, and allow nothing beyond 0700 (0750 with a group): a
// directory of another user, or one that gives the group write access or others any, may serve others too and is
// refused, never chmod-ed. A stricter one is taken as it is. The checks read modes and owners, so they hold as root.
func TestAnExistingSocketDirectoryIsTakenOnlyWhenItIsCrewdsAlone(t *testing.T) {
	gid := os.Getegid()
	if gid == 0 {
		gid = 65534 // root may give its files to any group; others use their own
	}
	for _, tc := range []struct {
		name     string
		mode     os.FileMode
		group    int // the socket group, 0 for none
		owner    int // the directory's owner when not crewd's uid (root only), 0 for crewd's
		refusal  string
		rootOnly bool
	}{
		{name: "private", mode: 0o700},
		{name: "stricter than private", mode: 0o300},
		{name: "the group's, 0750", mode: 0o750, group: gid},
		{name: "the group's, stricter: 0710", mode: 0o710, group: gid},
		{name: "the group may write", mode: 0o770, group: gid, refusal: "at most mode 0750"},
		{name: "the group may write and enter", mode: 0o730, group: gid, refusal: "at most mode 0750"},
		{name: "others may enter, with a group", mode: 0o751, group: gid, refusal: "at most mode 0750"},
		{name: "others may read, with a group", mode: 0o754, group: gid, refusal: "at most mode 0750"},
		{name: "the group may enter, without a group", mode: 0o710, refusal: "others may reach the socket"},
		{name: "another user's", mode: 0o700, owner: 65534, refusal: "belongs to another user", rootOnly: true},
		{name: "another user's, with a group", mode: 0o750, group: gid, owner: 65534,
			refusal: "belongs to another user", rootOnly: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.rootOnly && os.Geteuid() != 0 {
				t.Skip("only root can give a directory away") // the other cases run everywhere
			}
			dir := filepath.Join(brokertest.SocketDir(t), "existing")
			require.NoError(t, os.Mkdir(dir, 0o700))
			uid, group := -1, -1 // -1: left as made
			if tc.owner != 0 {
				uid = tc.owner
			}
			if tc.group != 0 {
				group = tc.group
			}
			require.NoError(t, os.Chown(dir, uid, group))
			require.NoError(t, os.Chmod(dir, tc.mode))
			f := newFixture(t, fixtureOpts{})
			s, err := New(f.eng, f.log, Options{SocketPath: filepath.Join(dir, "b.sock"), ServerKey: make([]byte, 32),
				SocketGroup: tc.group})
			require.NoError(t, err)
			t.Cleanup(func() { s.Close() })

			err = s.Listen()
			if tc.refusal == "" {
				require.NoError(t, err)
			} else {
				require.ErrorContains(t, err, tc.refusal)
				_, err := os.Lstat(filepath.Join(dir, "b.sock"))
				require.ErrorIs(t, err, os.ErrNotExist, "nothing bound there")
			}
			fi, err := os.Stat(dir)
			require.NoError(t, err)
			require.Equal(t, tc.mode, fi.Mode().Perm(), "taken as it is, never chmod-ed")
		})
	}
}
