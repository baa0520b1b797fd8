package eventlog

import "golang.org/x/sys/unix"

// FreeSpace is the space of dir's file system available to an unprivileged user (statfs f_bavail), a little less
// than root may use: what crewd's minimum and a checkpoint's room are measured against.
func FreeSpace(dir string) (uint64, error) {
	var st unix.Statfs_t
	if err := unix.Statfs(dir, &st); err != nil {
		return 0, err
	}
	return st.Bavail * uint64(st.Bsize), nil
}
