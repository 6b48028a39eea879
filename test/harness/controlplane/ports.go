package controlplane

import (
	"errors"
	"math/rand/v2"
	"net"
	"os"
	"strconv"
	"strings"
)

// errPortTaken marks a start that failed because the port was taken between
// freePort and the child's bind; such a start is retried on new ports.
var errPortTaken = errors.New("port already in use")

// freePort finds an unused loopback port below the kernel's ephemeral range.
// A port from that range (what "127.0.0.1:0" hands out) can, once the API
// server is stopped for a restart test, become the local port of any
// outgoing connection on the machine, and the restart then fails with
// "address already in use". Another process can still take the port before
// our child binds it; callers retry on that.
func freePort() (int, error) {
	lo := ephemeralLow()
	for range 100 {
		port := 10000 + rand.IntN(max(lo-10000, 1000))
		l, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(port))
		if err == nil {
			l.Close()
			return port, nil
		}
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// ephemeralLow is the first port of the kernel's ephemeral range.
func ephemeralLow() int {
	b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range")
	if err == nil {
		if f := strings.Fields(string(b)); len(f) == 2 {
			if n, err := strconv.Atoi(f[0]); err == nil && n > 11000 {
				return n
			}
		}
	}
	return 32768
}
