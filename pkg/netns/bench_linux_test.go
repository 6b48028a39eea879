package netns_test

import (
	"testing"

	"golang.org/x/sys/unix"

	"github.com/probed-dev/probed/pkg/netns/netnstest"
)

// The cost of making a socket inside a namespace (a goroutine locked to
// its thread, two setns) against making it where probed is.
func BenchmarkSocket(b *testing.B) {
	ns := netnstest.New(b)
	b.Run("here", func(b *testing.B) {
		for b.Loop() {
			fd, err := unix.Socket(unix.AF_INET, unix.SOCK_STREAM|unix.SOCK_NONBLOCK|unix.SOCK_CLOEXEC, 0)
			if err != nil {
				b.Fatal(err)
			}
			_ = unix.Close(fd)
		}
	})
	b.Run("inside", func(b *testing.B) {
		for b.Loop() {
			fd, err := ns.Socket(unix.AF_INET, unix.SOCK_STREAM, 0)
			if err != nil {
				b.Fatal(err)
			}
			_ = unix.Close(fd)
		}
	})
}
