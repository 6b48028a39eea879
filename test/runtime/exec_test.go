//go:build runtime

package runtimetest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	goruntime "runtime"
	"strings"
	"testing"
	"time"

	"github.com/probed-dev/probed/pkg/cri"
	ctrd "github.com/probed-dev/probed/test/harness/containerd"
)

func int64p(i int64) *int64 { return &i }

// execCase is one row of the shared table: both implementations must agree.
type execCase struct {
	name     string
	cmd      []string
	wantCode int
	wantOut  string
	// wantErr, when set, means the call fails (and is not a timeout).
	wantErr string
}

var execCases = []execCase{
	{name: "exit 0", cmd: []string{"true"}, wantCode: 0},
	{name: "exit 1", cmd: []string{"false"}, wantCode: 1},
	{name: "exit 127 from the shell", cmd: []string{"sh", "-c", "no-such-command"}, wantCode: 127,
		wantOut: "sh: no-such-command: not found\n"},
	{name: "exit 42 with output", cmd: []string{"sh", "-c", "echo out; echo err >&2; exit 42"}, wantCode: 42,
		wantOut: "out\nerr\n"},
	{name: "stdout before stderr", cmd: []string{"sh", "-c", "echo err >&2; sleep 0.1; echo out"},
		wantOut: "out\nerr\n"},
	// The command itself missing: runc cannot start it; containerd's CRI
	// reports that as an error, not an exit code, and so do we.
	{name: "missing binary", cmd: []string{"/no/such/binary"}, wantErr: "no such file or directory"},
	// What the container's spec gives every exec: env, cwd, user, groups.
	{name: "inherits env cwd user", cmd: []string{"sh", "-c", `echo "$GREETING|$EMPTY|$(pwd)|$(id -u):$(id -g)"`},
		wantOut: "hello world|$(NOT_EXPANDED)|/tmp|1000:1000\n"},
	{name: "inherits capabilities and rlimits", cmd: []string{"sh", "-c",
		`for f in CapEff CapBnd; do [ "$(grep $f /proc/self/status)" = "$(grep $f /proc/1/status)" ] || echo "$f differs"; done
		 [ "$(grep 'open files' /proc/self/limits)" = "$(grep 'open files' /proc/1/limits)" ] || echo "nofile differs"`}},
	{name: "args are not shell-split", cmd: []string{"echo", "a  b", "$HOME"}, wantOut: "a  b $HOME\n"},
}

func TestExecTable(t *testing.T) {
	c := newContainer(t, ctrd.ContainerSpec{
		Command:    idleCommand,
		Env:        []ctrd.EnvVar{{Name: "GREETING", Value: "hello world"}, {Name: "EMPTY", Value: "$(NOT_EXPANDED)"}},
		WorkingDir: "/tmp",
		RunAsUser:  int64p(1000),
		RunAsGroup: int64p(1000),
	})
	forEachImpl(t, func(t *testing.T, rt cri.Runtime) {
		for _, tc := range execCases {
			t.Run(tc.name, func(t *testing.T) {
				before := runDirFIFOs(t)
				out, code, err := rt.ExecInContainer(context.Background(), c.RuntimeID(), tc.cmd, 10*time.Second)
				if tc.wantErr != "" {
					if err == nil || !strings.Contains(err.Error(), tc.wantErr) || cri.IsTimeout(err) {
						t.Fatalf("want an error containing %q, got out=%q code=%d err=%v", tc.wantErr, out, code, err)
					}
					if !strings.Contains(err.Error(), c.RuntimeID()) {
						t.Errorf("error does not name the container: %v", err)
					}
					t.Logf("error: %v", err)
				} else {
					if err != nil {
						t.Fatal(err)
					}
					if code != tc.wantCode || string(out) != tc.wantOut {
						t.Fatalf("got code %d out %q, want %d %q", code, out, tc.wantCode, tc.wantOut)
					}
				}
				if after := runDirFIFOs(t); !equal(before, after) {
					t.Errorf("FIFOs changed:\nbefore %v\nafter  %v", before, after)
				}
			})
		}
	})
}

func TestExecOutputCappedAt10KiB(t *testing.T) {
	c := newContainer(t, ctrd.ContainerSpec{Command: idleCommand})
	forEachImpl(t, func(t *testing.T, rt cri.Runtime) {
		for _, tc := range []struct {
			name, script string
			want         []byte
		}{
			{"stdout 11 KiB", "head -c 11264 /dev/zero | tr '\\0' a", bytes.Repeat([]byte("a"), 10240)},
			{"stdout 9 KiB then stderr 2 KiB", "head -c 9216 /dev/zero | tr '\\0' a; head -c 2048 /dev/zero | tr '\\0' b >&2",
				append(bytes.Repeat([]byte("a"), 9216), bytes.Repeat([]byte("b"), 1024)...)},
		} {
			t.Run(tc.name, func(t *testing.T) {
				out, code, err := rt.ExecInContainer(context.Background(), c.RuntimeID(), []string{"sh", "-c", tc.script}, 10*time.Second)
				if err != nil || code != 0 {
					t.Fatalf("code %d err %v", code, err)
				}
				if !bytes.Equal(out, tc.want) {
					t.Fatalf("got %d bytes, want exactly %d", len(out), len(tc.want))
				}
			})
		}
	})
}

// TestExecHugeOutputBoundedMemory: 4 and 64 MiB of output must not be held
// by the test process. The native client discards it as it reads. Through
// CRI, containerd caps each stream at 16 MiB and refuses to send a
// response that large (64 MiB: as the kubelet's would, the exec fails
// with an error); probed refuses to read an answer over
// cri.MaxExecAnswerBytes (4 MiB), where the kubelet would read it whole.
func TestExecHugeOutputBoundedMemory(t *testing.T) {
	c := newContainer(t, ctrd.ContainerSpec{Command: idleCommand})
	forEachImpl(t, func(t *testing.T, rt cri.Runtime) {
		for _, tc := range []struct {
			bytes int
			cri   string // what the CRI path's error says
		}{
			{4 << 20, "exceed the 1 MiB probed reads of an exec's answer"},
			{64 << 20, "output too large for the runtime's response size limit"},
		} {
			heap0, total0, rss0 := memory()
			start := time.Now()
			out, code, err := rt.ExecInContainer(context.Background(), c.RuntimeID(),
				[]string{"sh", "-c", fmt.Sprintf("head -c %d /dev/zero", tc.bytes)}, 30*time.Second)
			elapsed := time.Since(start)
			heap1, total1, rss1 := memory()
			t.Logf("%d MiB output: %v; len(out)=%d code=%d err=%v; heap %+d KiB, allocated %d KiB, RSS %+d KiB",
				tc.bytes>>20, elapsed, len(out), code, err, (heap1-heap0)/1024, (total1-total0)/1024, (rss1-rss0)/1024)
			if cri.RuntimeName(rt) == "containerd" {
				if err != nil || code != 0 || len(out) != cri.MaxOutputBytes {
					t.Fatalf("native: want exit 0 with 10 KiB, got %d bytes, code %d, %v", len(out), code, err)
				}
			} else if err == nil || !strings.Contains(err.Error(), tc.cri) {
				t.Fatalf("CRI: want an error saying %q, got %d bytes, code %d, %v", tc.cri, len(out), code, err)
			}
			// RSS moves with the GC and the race detector: a looser bound.
			const allocBound, rssBound = 2 << 20, 8 << 20
			if total1-total0 > allocBound {
				t.Errorf("allocated %d KiB for one exec of %d MiB, bound %d KiB", (total1-total0)/1024, tc.bytes>>20, allocBound/1024)
			}
			if rss1-rss0 > rssBound {
				t.Errorf("RSS grew %d KiB, bound %d KiB", (rss1-rss0)/1024, rssBound/1024)
			}
		}
	})
}

// memory reports live heap and cumulative allocation after a GC, and RSS.
func memory() (heap, totalAlloc, rss int64) {
	goruntime.GC()
	var ms goruntime.MemStats
	goruntime.ReadMemStats(&ms)
	return int64(ms.HeapAlloc), int64(ms.TotalAlloc), vmRSS()
}

func TestExecErrors(t *testing.T) {
	h := need(t)
	stopped := newContainer(t, ctrd.ContainerSpec{Command: idleCommand})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := h.CRI().StopContainer(ctx, stopRequest(stopped.ID, 0)); err != nil {
		t.Fatal(err)
	}
	missing := "containerd://" + strings.Repeat("0badc0de", 8)
	forEachImpl(t, func(t *testing.T, rt cri.Runtime) {
		for _, tc := range []struct {
			name, id string
			want     error
		}{
			{"non-existent container", missing, cri.ErrContainerNotFound},
			{"stopped container", stopped.RuntimeID(), cri.ErrContainerNotRunning},
			{"docker ID", "docker://abc", cri.ErrUnsupportedRuntime},
			{"bare ID", stopped.ID, cri.ErrInvalidContainerID},
		} {
			t.Run(tc.name, func(t *testing.T) {
				_, _, err := rt.ExecInContainer(ctx, tc.id, []string{"true"}, 5*time.Second)
				if !errors.Is(err, tc.want) {
					t.Fatalf("got %v, want %v", err, tc.want)
				}
				if !strings.Contains(err.Error(), tc.id) || cri.IsTimeout(err) {
					t.Errorf("error should name %s and not be a timeout: %v", tc.id, err)
				}
				t.Logf("%s: %v", tc.name, err)
			})
		}
		t.Run("empty command", func(t *testing.T) {
			if _, _, err := rt.ExecInContainer(ctx, stopped.RuntimeID(), nil, time.Second); !errors.Is(err, cri.ErrEmptyCommand) {
				t.Fatalf("got %v", err)
			}
		})
		t.Run("stop non-existent", func(t *testing.T) {
			// CRI's StopContainer is idempotent: containerd 2's CRI plugin
			// answers success for a container it does not know, as the CRI
			// contract says, where 1.6 answered NotFound. Either is fine for
			// a kill; any other error is not.
			err := rt.StopContainer(ctx, missing, time.Second)
			if err != nil && !errors.Is(err, cri.ErrContainerNotFound) {
				t.Fatalf("got %v", err)
			}
		})
		t.Run("stop stopped", func(t *testing.T) {
			if err := rt.StopContainer(ctx, stopped.RuntimeID(), time.Second); err != nil {
				t.Fatalf("stopping a stopped container: %v", err)
			}
		})
		t.Run("ready", func(t *testing.T) {
			if err := rt.Ready(ctx); err != nil {
				t.Fatal(err)
			}
		})
	})
}

func runDirFIFOs(t *testing.T) []string {
	t.Helper()
	f, err := ctrd.AllFIFOs(need(t).RunDir())
	if err != nil {
		t.Fatal(err)
	}
	return f
}

func equal(a, b []string) bool {
	return strings.Join(a, "\n") == strings.Join(b, "\n")
}
