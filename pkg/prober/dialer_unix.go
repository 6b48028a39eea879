//go:build unix

package prober

import "syscall"

// lingerControl sets SO_LINGER to 1s on a probe socket before it connects.
// A failure to set it is ignored, as the kubelet does: the probe still works.
func lingerControl(_, _ string, c syscall.RawConn) error {
	return c.Control(func(fd uintptr) {
		_ = syscall.SetsockoptLinger(int(fd), syscall.SOL_SOCKET, syscall.SO_LINGER,
			&syscall.Linger{Onoff: 1, Linger: 1})
	})
}

// setLinger is lingerControl on a bare socket.
func setLinger(fd uintptr) {
	_ = syscall.SetsockoptLinger(int(fd), syscall.SOL_SOCKET, syscall.SO_LINGER,
		&syscall.Linger{Onoff: 1, Linger: 1})
}
