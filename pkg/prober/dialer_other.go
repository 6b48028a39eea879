//go:build !unix

package prober

import "syscall"

// lingerControl is a no-op where SO_LINGER cannot be set through syscall.
func lingerControl(_, _ string, _ syscall.RawConn) error { return nil }

// setLinger is a no-op here.
func setLinger(uintptr) {}
