//go:build runtime

package runtimetest

import (
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// blackholeAddr is a pod-like address that, inside the black-hole
// namespace, is local but drops every TCP segment sent to it: SYNs go
// unanswered, as to a pod whose node vanished.
const blackholeAddr = "10.255.255.1"

// blackholeNetns creates a network namespace for this test with loopback up,
// blackholeAddr on it, and an nftables rule dropping TCP to that address.
// It returns the namespace, to run code in with inNetns.
func blackholeNetns(t testing.TB) *os.File {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("the black-hole namespace needs root")
	}
	name := fmt.Sprintf("probed-hostile-%d", os.Getpid())
	run := func(args ...string) {
		t.Helper()
		if out, err := exec.Command(args[0], args[1:]...).CombinedOutput(); err != nil {
			t.Fatalf("%s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
	run("ip", "netns", "add", name)
	t.Cleanup(func() { _ = exec.Command("ip", "netns", "del", name).Run() })
	run("ip", "-n", name, "link", "set", "lo", "up")
	run("ip", "-n", name, "addr", "add", blackholeAddr+"/32", "dev", "lo")
	rules := fmt.Sprintf("table inet hostile { chain in { type filter hook input priority 0; ip daddr %s meta l4proto tcp drop; }; }", blackholeAddr)
	run("ip", "netns", "exec", name, "nft", rules)
	f, err := os.Open("/run/netns/" + name)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = f.Close() })
	return f
}

// inNetns runs f on an OS thread moved into ns. The thread is never
// unlocked, so it exits with the goroutine instead of returning to the
// scheduler in the wrong namespace. Only sockets f creates on its own
// goroutine (a TCP probe's dial) live in ns.
func inNetns(ns *os.File, f func()) error {
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		if err := unix.Setns(int(ns.Fd()), unix.CLONE_NEWNET); err != nil {
			errc <- fmt.Errorf("setns: %w", err)
			return
		}
		f()
		errc <- nil
	}()
	return <-errc
}
