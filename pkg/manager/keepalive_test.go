package manager

import (
	"testing"

	"github.com/probed-dev/probed/pkg/probespec"
)

// TestWorkersGetKeepAlive: "probed.io/keepAlive" reaches the prober's
// Target, with the worker's Session to keep the connection in.
func TestWorkersGetKeepAlive(t *testing.T) {
	tp := &targetProber{}
	e := newEnvWith(t, func(o *Options) { o.Prober = tp })
	kept := map[string]any{"httpGet": map[string]any{"port": 1, "path": "/"}, "periodSeconds": 1, probespec.KeepAliveField: true}
	plain := map[string]any{"httpGet": map[string]any{"port": 1, "path": "/"}, "periodSeconds": 1}
	pod := runningPod("p", "u1", annotate(map[string]map[string]any{"app": {"readinessProbe": kept, "livenessProbe": plain}}), "app")
	e.create(pod)
	e.eventually("both probes", func() bool {
		tp.mu.Lock()
		defer tp.mu.Unlock()
		return len(tp.targets) >= 2
	})
	tp.mu.Lock()
	defer tp.mu.Unlock()
	var on, off int
	for _, tg := range tp.targets {
		if tg.Session == nil {
			t.Errorf("httpGet target without a Session: %+v", tg)
		}
		if tg.KeepAlive {
			on++
		} else {
			off++
		}
	}
	if on == 0 || off == 0 {
		t.Errorf("KeepAlive on %d, off %d targets; want both", on, off)
	}
}
