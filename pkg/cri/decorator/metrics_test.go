package decorator

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/probed-dev/probed/pkg/cri/none"

	"github.com/probed-dev/probed/internal/metricstest"
	"github.com/probed-dev/probed/pkg/cri"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

// The runtime metrics pass the Prometheus metric linter: promlint in
// process, and `promtool check metrics` when it is installed.
func TestMetricsLint(t *testing.T) {
	reg := prometheus.NewRegistry()
	m := NewMetrics(reg)
	m.observeQueueWait(time.Millisecond)
	m.addInFlight(1)
	for _, o := range []string{OutcomeSuccess, OutcomeNonzeroExit, OutcomeTimeout, OutcomeError} {
		m.observeExec(cri.TypeNative, o, 30*time.Millisecond, o != OutcomeError)
	}
	m.observeStop(cri.TypeNative, nil, time.Second)
	m.observeStop(cri.TypeNative, errors.New("boom"), time.Second)
	metricstest.Lint(t, reg)
}

// With no runtime (--runtime-type=none) an exec still gets a slot, so it
// counts as an error and is timed, and a stop counts as an error: every
// runtime series appears once an exec or a stop has been tried.
func TestMetricsWithNoRuntime(t *testing.T) {
	reg := prometheus.NewRegistry()
	l := NewLimited(none.None(), 1, NewMetrics(reg))
	if _, _, err := l.ExecInContainer(context.Background(), "containerd://x", []string{"true"}, time.Second); !errors.Is(err, none.ErrNoRuntime) {
		t.Fatalf("exec: %v, want ErrNoRuntime", err)
	}
	if err := l.StopContainer(context.Background(), "containerd://x", time.Second); !errors.Is(err, none.ErrNoRuntime) {
		t.Fatalf("stop: %v, want ErrNoRuntime", err)
	}
	for name, want := range map[string]int{
		"probed_runtime_exec_total": 1, "probed_runtime_exec_duration_seconds": 1,
		"probed_runtime_exec_queue_wait_seconds": 1, "probed_runtime_exec_in_flight": 1,
		"probed_runtime_stops_total": 1, "probed_runtime_stop_duration_seconds": 1,
	} {
		if n, err := testutil.GatherAndCount(reg, name); err != nil || n != want {
			t.Errorf("%s: %d series (%v), want %d", name, n, err, want)
		}
	}
	want := `
# HELP probed_runtime_exec_total Exec calls into the container runtime, by runtime and outcome (success, nonzero_exit, timeout, error, queue_timeout).
# TYPE probed_runtime_exec_total counter
probed_runtime_exec_total{outcome="error",runtime="none"} 1
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "probed_runtime_exec_total"); err != nil {
		t.Error(err)
	}
}
