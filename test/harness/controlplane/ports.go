package controlplane

import (
	"errors"
	"net"
)

// errPortTaken marks a start that failed because the port was taken between
// freePort and the child's bind; such a start is retried on new ports.
var errPortTaken = errors.New("port already in use")

// freePort asks the kernel for an unused loopback port. Another process can
// take it before our child binds it; callers retry on "address already in use".
func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}
