//go:build integration

package integration

import (
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
)

type probes map[string]map[string]any

func httpProbe(port int, path string, extra map[string]any) map[string]any {
	p := map[string]any{"httpGet": map[string]any{"path": path, "port": port}, "periodSeconds": 1}
	for k, v := range extra {
		p[k] = v
	}
	return p
}

// Readiness follows the target, with failureThreshold and successThreshold
// respected, and the aggregate condition follows every container.
func TestReadinessFollowsTarget(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ip := loopbackIP()
	app := startHTTPTarget(t, ip, true)
	side := startHTTPTarget(t, ip, true)
	pod := e.createPod("web", mustJSON(probes{
		"app":  {"readinessProbe": httpProbe(app.Port, "/ready", map[string]any{"failureThreshold": 3, "successThreshold": 2})},
		"side": {"readinessProbe": httpProbe(side.Port, "/ready", nil)},
	}), true, container{name: "app"}, container{name: "side"})
	e.runPod(pod, ip, time.Minute)
	p := e.startProbed()

	e.waitCond("web", "ready.probed.io/app", v1.ConditionTrue, 20*time.Second)
	e.waitCond("web", "ready.probed.io/side", v1.ConditionTrue, 20*time.Second)
	e.waitCond("web", "probed.io/ready", v1.ConditionTrue, 10*time.Second)

	// failureThreshold 3: at least three failed probes before the flip.
	h0 := app.hits.Load()
	app.Set(false)
	e.waitCond("web", "ready.probed.io/app", v1.ConditionFalse, 20*time.Second)
	if n := app.hits.Load() - h0; n < 3 {
		t.Errorf("condition went False after %d failed probes, want >= 3 (failureThreshold)", n)
	}
	c := condition(e.pod("web"), "ready.probed.io/app")
	if c.Reason != "ProbeFailed" || !strings.Contains(c.Message, "statuscode: 503") {
		t.Errorf("condition = %+v, want reason ProbeFailed with the probe output", c)
	}
	e.waitCond("web", "probed.io/ready", v1.ConditionFalse, 5*time.Second)
	if !e.condIs("web", "ready.probed.io/side", v1.ConditionTrue) {
		t.Error("the other container's condition changed")
	}

	// successThreshold 2: at least two good probes before it is True again.
	h1 := app.hits.Load()
	app.Set(true)
	e.waitCond("web", "ready.probed.io/app", v1.ConditionTrue, 20*time.Second)
	if n := app.hits.Load() - h1; n < 2 {
		t.Errorf("condition went True after %d good probes, want >= 2 (successThreshold)", n)
	}
	e.waitCond("web", "probed.io/ready", v1.ConditionTrue, 5*time.Second)

	// Metrics carry the kubelet's names and labels.
	lines := p.metricLines(`prober_probe_total{container="app",namespace="` + e.ns + `",pod="web",pod_uid="` + string(pod.UID) + `",probe_type="Readiness",result="failed"}`)
	if len(lines) != 1 {
		t.Errorf("no failed prober_probe_total series for app: %v", p.metricLines("prober_probe_total"))
	}
	if len(p.metricLines(`prober_probe_duration_seconds_count{container="app",namespace="`+e.ns+`",pod="web",probe_type="Readiness"}`)) != 1 {
		t.Errorf("no prober_probe_duration_seconds series: %v", p.metricLines("prober_probe_duration_seconds_count"))
	}
	if len(p.metricLines(`probed_workers{probe_type="Readiness"} 2`)) != 1 {
		t.Errorf("probed_workers: %v", p.metricLines("probed_workers"))
	}
	for _, name := range []string{"probed_status_writes_total", "probed_status_write_duration_seconds_count", "probed_probe_lateness_seconds_count"} {
		if len(p.metricLines(name)) == 0 {
			t.Errorf("metric %s missing", name)
		}
	}
}

// initialDelaySeconds: no probe before it, so not ready before it.
func TestInitialDelay(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ip := loopbackIP()
	app := startHTTPTarget(t, ip, true)
	pod := e.createPod("slow", mustJSON(probes{
		"app": {"readinessProbe": httpProbe(app.Port, "/ready", map[string]any{"initialDelaySeconds": 4})},
	}), true, container{name: "app"})
	e.runPod(pod, ip, 0)
	started := time.Now()
	e.startProbed()
	e.waitCond("slow", "ready.probed.io/app", v1.ConditionTrue, 20*time.Second)
	if el := time.Since(started); el < 3*time.Second {
		t.Errorf("ready after %v, before initialDelaySeconds=4 (less a second of rounding)", el)
	}
}

// A startup probe gates readiness; once it succeeds readiness takes over at once.
func TestStartupGatesReadiness(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ip := loopbackIP()
	ready := startHTTPTarget(t, ip, true)
	startup := startHTTPTarget(t, ip, false)
	pod := e.createPod("starter", mustJSON(probes{
		"app": {
			"readinessProbe": httpProbe(ready.Port, "/ready", map[string]any{"periodSeconds": 60}),
			"startupProbe":   httpProbe(startup.Port, "/healthz", map[string]any{"failureThreshold": 1000}),
		},
	}), true, container{name: "app"})
	e.runPod(pod, ip, time.Minute)
	e.startProbed()
	e.waitCond("starter", "started.probed.io/app", v1.ConditionFalse, 20*time.Second)
	e.waitCond("starter", "ready.probed.io/app", v1.ConditionFalse, 5*time.Second)
	if c := condition(e.pod("starter"), "ready.probed.io/app"); c.Reason != "WaitingForStartup" {
		t.Errorf("readiness reason = %q, want WaitingForStartup", c.Reason)
	}
	consistently(t, "readiness not probed before startup", 2*time.Second, func() bool { return ready.hits.Load() == 0 })
	startup.Set(true)
	e.waitCond("starter", "started.probed.io/app", v1.ConditionTrue, 10*time.Second)
	// periodSeconds is 60: only the trigger on startup success makes this quick.
	e.waitCond("starter", "ready.probed.io/app", v1.ConditionTrue, 10*time.Second)
	e.waitCond("starter", "probed.io/ready", v1.ConditionTrue, 5*time.Second)
}

// Conditions owned by others are untouched, and nothing is written while nothing changes.
func TestOthersConditionsUntouchedAndNoIdleWrites(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ip := loopbackIP()
	app := startHTTPTarget(t, ip, true)
	pod := e.createPod("quiet", mustJSON(probes{"app": {"readinessProbe": httpProbe(app.Port, "/ready", nil)}}), true, container{name: "app"})
	e.runPod(pod, ip, time.Minute)
	e.updateStatus("quiet", func(p *v1.Pod) {
		p.Status.Conditions = append(p.Status.Conditions,
			v1.PodCondition{Type: "example.com/other", Status: v1.ConditionTrue, Reason: "Theirs", Message: "not probed's"},
			v1.PodCondition{Type: v1.PodScheduled, Status: v1.ConditionTrue})
	})
	before := condition(e.pod("quiet"), "example.com/other").DeepCopy()
	e.startProbed()
	e.waitCond("quiet", "probed.io/ready", v1.ConditionTrue, 20*time.Second)

	after := condition(e.pod("quiet"), "example.com/other")
	if after == nil || after.Status != before.Status || after.Reason != before.Reason || after.Message != before.Message ||
		!after.LastTransitionTime.Equal(&before.LastTransitionTime) {
		t.Errorf("someone else's condition changed: %+v -> %+v", before, after)
	}
	if condition(e.pod("quiet"), string(v1.PodScheduled)) == nil {
		t.Error("PodScheduled condition removed")
	}
	// Many probes and a status resync (5s) pass; the pod is not written again.
	rv := e.pod("quiet").ResourceVersion
	h := app.hits.Load()
	consistently(t, "no writes while nothing changes", 7*time.Second, func() bool { return e.pod("quiet").ResourceVersion == rv })
	if app.hits.Load()-h < 5 {
		t.Errorf("only %d probes in 7s at periodSeconds=1", app.hits.Load()-h)
	}
}
