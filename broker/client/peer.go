package client

import (
	"fmt"
	"net"

	"golang.org/x/sys/unix"
)

// checkBroker hands check the uid of the process listening at conn's other end, as the kernel recorded it when
// that process bound or listened (SO_PEERCRED), so an impostor cannot claim another uid.
func checkBroker(conn net.Conn, check func(uid int) error) error {
	uc, ok := conn.(*net.UnixConn)
	if !ok {
		return fmt.Errorf("client: broker credentials: not a unix connection")
	}
	raw, err := uc.SyscallConn()
	if err != nil {
		return fmt.Errorf("client: broker credentials: %w", err)
	}
	var cred *unix.Ucred
	var serr error
	if err := raw.Control(func(fd uintptr) {
		cred, serr = unix.GetsockoptUcred(int(fd), unix.SOL_SOCKET, unix.SO_PEERCRED)
	}); err != nil {
		return fmt.Errorf("client: broker credentials: %w", err)
	}
	if serr != nil {
		return fmt.Errorf("client: broker credentials: %w", serr)
	}
	if err := check(int(cred.Uid)); err != nil {
		return fmt.Errorf("client: broker at %s: %w", uc.RemoteAddr(), err)
	}
	return nil
}
