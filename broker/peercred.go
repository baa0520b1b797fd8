package broker

import (
	"fmt"
	"net"
	"os"
	"slices"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// peer is who is on the other end of a unix connection, as the kernel recorded it at connect (SO_PEERCRED).
type peer struct {
	PID, UID, GID int
	Groups        []int // supplementary groups, read from /proc; nil when unknown
}

// peerOf reads the credentials of nc's peer.
func peerOf(nc *net.UnixConn) (peer, error) {
	raw, err := nc.SyscallConn()
	if err != nil {
		return peer{}, fmt.Errorf("broker: peer credentials: %w", err)
	}
	var cred *unix.Ucred
	var serr error
	if err := raw.Control(func(fd uintptr) {
		cred, serr = unix.GetsockoptUcred(int(fd), unix.SOL_SOCKET, unix.SO_PEERCRED)
	}); err != nil {
		return peer{}, fmt.Errorf("broker: peer credentials: %w", err)
	}
	if serr != nil {
		return peer{}, fmt.Errorf("broker: peer credentials: %w", serr)
	}
	return peer{PID: int(cred.Pid), UID: int(cred.Uid), GID: int(cred.Gid)}, nil
}

// supplementaryGroups reads the Groups line of /proc/<pid>/status. NB: the pid is the connecting process's at
// connect time; should it have exited and its pid been reused, the groups read are another process's. The file
// modes (socket 0660 with the group) are the primary check; this one is defence in depth.
func supplementaryGroups(pid int) []int {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		return nil
	}
	for line := range strings.SplitSeq(string(b), "\n") {
		rest, ok := strings.CutPrefix(line, "Groups:")
		if !ok {
			continue
		}
		var groups []int
		for _, f := range strings.Fields(rest) {
			if g, err := strconv.Atoi(f); err == nil {
				groups = append(groups, g)
			}
		}
		return groups
	}
	return nil
}

// allowedPeer reports whether p may talk to a broker running as uid: the same uid, or, when group is not 0, a
// member of group (primary or supplementary). A root peer is not special: it is another uid.
func allowedPeer(p peer, uid, group int) bool {
	if p.UID == uid {
		return true
	}
	return group != 0 && (p.GID == group || slices.Contains(p.Groups, group))
}

// checkPeer returns the peer of nc, or refuses a connection whose peer is neither this process's uid nor in the
// socket group.
func (s *Server) checkPeer(nc *net.UnixConn) (peer, error) {
	p, err := peerOf(nc)
	if err != nil {
		return peer{}, err
	}
	uid := os.Geteuid()
	if p.UID != uid && s.opts.SocketGroup != 0 && p.GID != s.opts.SocketGroup {
		p.Groups = supplementaryGroups(p.PID)
	}
	if !allowedPeer(p, uid, s.opts.SocketGroup) {
		return peer{}, fmt.Errorf("broker: peer uid %d gid %d (pid %d) is neither uid %d nor in the socket group",
			p.UID, p.GID, p.PID, uid)
	}
	return p, nil
}
