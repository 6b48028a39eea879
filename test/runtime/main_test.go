//go:build runtime

package runtimetest

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"
	"k8s.io/klog/v2"

	"github.com/probed-dev/probed/pkg/cri"
	"github.com/probed-dev/probed/pkg/cri/connect"
	ctrd "github.com/probed-dev/probed/test/harness/containerd"
)

// env is the private containerd shared by every test and benchmark here.
var (
	env     *ctrd.Containerd
	skipMsg string
)

func TestMain(m *testing.M) {
	os.Exit(run(m))
}

func run(m *testing.M) int {
	// PROBED_TEST_V=5 shows pkg/cri's own logs.
	fs := flag.NewFlagSet("klog", flag.ContinueOnError)
	klog.InitFlags(fs)
	_ = fs.Set("v", os.Getenv("PROBED_TEST_V"))
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	h, err := ctrd.Start(ctx, ctrd.Options{})
	cancel()
	switch {
	case errors.Is(err, ctrd.ErrMissingBinaries):
		skipMsg = err.Error()
	case err != nil:
		fmt.Fprintf(os.Stderr, "runtime tests: start containerd: %v\n", err)
		return 1
	default:
		env = h
		vctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		v, err := h.Version(vctx)
		cancel()
		fmt.Fprintf(os.Stderr, "runtime tests: containerd %s %v (pid %d), run dir %s\n", v, err, h.PID(), h.RunDir())
	}
	code := m.Run()
	if env != nil {
		if err := env.Stop(); err != nil {
			fmt.Fprintf(os.Stderr, "runtime tests: stop containerd: %v\n", err)
			code = 1
		}
	}
	if code == 0 {
		if err := goleak.Find(goleakOpts()...); err != nil {
			fmt.Fprintf(os.Stderr, "runtime tests: goroutine leak: %v\n", err)
			code = 1
		}
	}
	return code
}

func goleakOpts(extra ...goleak.Option) []goleak.Option {
	return append([]goleak.Option{
		goleak.IgnoreTopFunction("k8s.io/klog/v2.(*flushDaemon).run.func1"),
	}, extra...)
}

// need skips the test when containerd is not installed.
func need(t testing.TB) *ctrd.Containerd {
	t.Helper()
	if env == nil {
		t.Skipf("skipping runtime tier: %s", skipMsg)
	}
	return env
}

// impl is one cri.Runtime implementation under test.
type impl struct {
	name string
	opts func(h *ctrd.Containerd) cri.Options
}

var impls = []impl{
	{"containerd", func(h *ctrd.Containerd) cri.Options {
		return cri.Options{Endpoint: h.Endpoint(), Type: cri.TypeNative, FIFODir: h.FIFODir()}
	}},
	{"cri", func(h *ctrd.Containerd) cri.Options {
		return cri.Options{Endpoint: h.Endpoint(), Type: cri.TypeCRI}
	}},
	{"containerd-cri", func(h *ctrd.Containerd) cri.Options {
		return cri.Options{Endpoint: h.Endpoint(), Type: cri.TypeContainerdCRI}
	}},
}

// forEachImpl runs f as a subtest per implementation, each with a fresh
// Runtime, and checks afterwards that it leaked no goroutine and, for the
// native client, no FIFO.
func forEachImpl(t *testing.T, f func(t *testing.T, rt cri.Runtime)) {
	h := need(t)
	for _, im := range impls {
		t.Run(im.name, func(t *testing.T) {
			ignore := goleak.IgnoreCurrent()
			ctx := context.Background()
			rt, err := connect.New(ctx, im.opts(h))
			if err != nil {
				t.Fatal(err)
			}
			if got := cri.RuntimeName(rt); got != im.name {
				t.Fatalf("runtime name %q, want %q", got, im.name)
			}
			f(t, rt)
			if err := rt.Close(); err != nil {
				t.Errorf("close: %v", err)
			}
			if left, _ := ctrd.FIFOs(h.FIFODir()); len(left) > 0 {
				t.Errorf("left in the FIFO dir: %v", left)
			}
			noLiveExecs(t, h)
			goleak.VerifyNone(t, goleakOpts(ignore)...)
		})
	}
}

// noLiveExecs fails unless every exec has been deleted from its shim. The CRI
// plugin deletes its execs asynchronously, so allow it a few seconds.
func noLiveExecs(t *testing.T, h *ctrd.Containerd) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		live, err := h.LiveExecs()
		if err == nil && len(live) == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Errorf("execs not deleted from the shim: %v %v", live, err)
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// newContainer runs a test pod and removes it when the test ends.
func newContainer(t testing.TB, spec ctrd.ContainerSpec) *ctrd.Container {
	t.Helper()
	h := need(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, err := h.RunContainer(ctx, spec)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := h.RemovePod(ctx, c.PodSandboxID); err != nil {
			t.Errorf("remove pod: %v", err)
		}
	})
	return c
}

// idleCommand is a container main process that reaps orphans (ash's wait
// reaps any child) and exits on SIGTERM.
var idleCommand = []string{"sh", "-c", `trap "exit 0" TERM; sleep 100000 & wait`}

// ps lists the container's processes as "PID STAT ARGS" lines, via CRI on the
// harness's own connection, independent of the code under test.
func ps(t testing.TB, id string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	out, code, err := need(t).Exec(ctx, id, "ps", "-o", "pid,stat,args")
	if err != nil || code != 0 {
		t.Fatalf("ps: %q %d %v", out, code, err)
	}
	return out
}

// processesMatching returns the ps lines with marker in them, excluding ps itself.
func processesMatching(t testing.TB, id, marker string) []string {
	var out []string
	for _, l := range strings.Split(ps(t, id), "\n") {
		if strings.Contains(l, marker) && !strings.Contains(l, "ps -o") {
			out = append(out, strings.TrimSpace(l))
		}
	}
	return out
}

// zombies returns ps lines of zombie processes.
func zombies(t testing.TB, id string) []string {
	var out []string
	for _, l := range strings.Split(ps(t, id), "\n") {
		if f := strings.Fields(l); len(f) >= 2 && strings.HasPrefix(f[1], "Z") {
			out = append(out, strings.TrimSpace(l))
		}
	}
	return out
}
