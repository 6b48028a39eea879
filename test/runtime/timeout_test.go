//go:build runtime

package runtimetest

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/probed-dev/probed/pkg/cri"
	ctrd "github.com/probed-dev/probed/test/harness/containerd"
)

func isNative(rt cri.Runtime) bool { return cri.RuntimeName(rt) == cri.TypeNative }

// killsTree: the native client, and containerd-cri through it, kill a
// timed-out command's whole process tree; plain CRI kills the command alone.
func killsTree(rt cri.Runtime) bool {
	n := cri.RuntimeName(rt)
	return n == cri.TypeNative || n == cri.TypeContainerdCRI
}

func TestExecTimeout(t *testing.T) {
	c := newContainer(t, ctrd.ContainerSpec{Command: idleCommand})
	forEachImpl(t, func(t *testing.T, rt cri.Runtime) {
		t.Run("sleep 30 with 1s timeout", func(t *testing.T) {
			before := runDirFIFOs(t)
			start := time.Now()
			_, _, err := rt.ExecInContainer(context.Background(), c.RuntimeID(), []string{"sleep", "3031"}, time.Second)
			elapsed := time.Since(start)
			var te *cri.TimeoutError
			if !errors.As(err, &te) || !cri.IsTimeout(err) {
				t.Fatalf("want a runtime *TimeoutError, got %v", err)
			}
			t.Logf("timed out after %v: %v", elapsed, err)
			if elapsed < time.Second || elapsed > 2*time.Second {
				t.Errorf("returned after %v, want between 1s and 2s", elapsed)
			}
			if left := processesMatching(t, c.ID, "3031"); len(left) > 0 {
				t.Errorf("left running in the container: %v", left)
			}
			if z := zombies(t, c.ID); len(z) > 0 {
				t.Errorf("zombies: %v", z)
			}
			if after := runDirFIFOs(t); !equal(before, after) {
				t.Errorf("FIFOs changed:\nbefore %v\nafter  %v", before, after)
			}
		})

		// The command forks children that hang, one in a session of its own.
		// Native and containerd-cri: the whole tree is found through /proc and killed.
		// CRI (containerd 1.6): only the command is killed; its children live on
		// and, holding the output pipe, keep containerd's ExecSync from
		// returning, so the call ends at our deadline (timeout + 2s slack).
		t.Run("forked children", func(t *testing.T) {
			const marker = "303"
			script := "sleep 3032 & setsid sleep 3033 & sleep 3034"
			start := time.Now()
			_, _, err := rt.ExecInContainer(context.Background(), c.RuntimeID(), []string{"sh", "-c", script}, time.Second)
			elapsed := time.Since(start)
			if !cri.IsTimeout(err) {
				t.Fatalf("want a timeout, got %v", err)
			}
			left := processesMatching(t, c.ID, "sleep "+marker)
			t.Logf("timed out after %v; left in the container: %v", elapsed, left)
			if killsTree(rt) {
				if elapsed > 2*time.Second {
					t.Errorf("returned after %v, want < 2s", elapsed)
				}
				if len(left) > 0 {
					t.Errorf("%s: children survived the timeout: %v", cri.RuntimeName(rt), left)
				}
				if z := zombies(t, c.ID); len(z) > 0 {
					t.Errorf("zombies: %v", z)
				}
				return
			}
			if elapsed > 4*time.Second {
				t.Errorf("returned after %v, want < timeout + slack + 1s", elapsed)
			}
			killMatching(t, c.ID, "sleep "+marker)
		})

		// A caller that gives up (shutdown) gets its context's error at once.
		t.Run("caller cancels", func(t *testing.T) {
			ctx, cancel := context.WithCancel(context.Background())
			time.AfterFunc(300*time.Millisecond, cancel)
			start := time.Now()
			_, _, err := rt.ExecInContainer(ctx, c.RuntimeID(), []string{"sleep", "3035"}, 10*time.Second)
			elapsed := time.Since(start)
			if !errors.Is(err, context.Canceled) || cri.IsTimeout(err) {
				t.Fatalf("want context.Canceled, got %v", err)
			}
			if elapsed > 1500*time.Millisecond {
				t.Errorf("returned %v after the start, want soon after the 300ms cancel", elapsed)
			}
			left := processesMatching(t, c.ID, "3035")
			t.Logf("cancelled after %v; left in the container: %v", elapsed, left)
			if isNative(rt) && len(left) > 0 {
				t.Errorf("native: command survived cancellation: %v", left)
			}
			killMatching(t, c.ID, "3035")
		})

		// The command exits but leaves a child holding the output pipe open.
		// Native and containerd-cri: output is read until the timeout, then the
		// child (still in the command's session) is killed; the exit code stands.
		// CRI (containerd 1.6) waits for the pipe and times out.
		t.Run("exits leaving a child on the pipe", func(t *testing.T) {
			const timeout = 3 * time.Second // the command itself must finish well within it
			start := time.Now()
			out, code, err := rt.ExecInContainer(context.Background(), c.RuntimeID(),
				[]string{"sh", "-c", "sleep 3036 & echo started"}, timeout)
			elapsed := time.Since(start)
			left := processesMatching(t, c.ID, "3036")
			t.Logf("after %v: out=%q code=%d err=%v; left in the container: %v", elapsed, out, code, err, left)
			if killsTree(rt) {
				if err != nil || code != 0 || string(out) != "started\n" {
					t.Errorf("%s: want exit 0 with its output, got %q %d %v", cri.RuntimeName(rt), out, code, err)
				}
				if len(left) > 0 {
					t.Errorf("%s: the child holding the pipe survived: %v", cri.RuntimeName(rt), left)
				}
			} else if err != nil && !cri.IsTimeout(err) {
				t.Errorf("CRI: want success or a timeout, got %v", err)
			}
			if elapsed > timeout+3*time.Second {
				t.Errorf("took %v", elapsed)
			}
			killMatching(t, c.ID, "3036")
		})
	})
}

// killMatching kills processes left behind by a test, so later tests start clean.
func killMatching(t *testing.T, id, marker string) {
	t.Helper()
	for _, l := range processesMatching(t, id, marker) {
		pid := strings.Fields(l)[0]
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		_, _, _ = need(t).Exec(ctx, id, "kill", "-9", pid)
		cancel()
	}
}
