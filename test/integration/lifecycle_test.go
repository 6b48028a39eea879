//go:build integration

package integration

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
)

// Events carry the kubelet's reason, type and text, point at the container,
// name probed and the node, and repeat as a count, not a storm.
func TestEventsAreKubeletShapedAndAggregated(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ip := loopbackIP()
	app := startHTTPTarget(t, ip, false)
	pod := e.createPod("sad", mustJSON(probes{"app": {"readinessProbe": httpProbe(app.Port, "/ready", nil)}}), true, container{name: "app"})
	e.runPod(pod, ip, time.Minute)
	e.startProbed()
	var ev *v1.Event
	eventually(t, "an Unhealthy event counted at least 4 times", 30*time.Second, func() bool {
		ev = e.findEvent(pod.UID, "Unhealthy", "Readiness probe failed: HTTP probe failed with statuscode: 503")
		return ev != nil && ev.Count >= 4
	})
	if ev.Type != v1.EventTypeWarning || ev.InvolvedObject.FieldPath != "spec.containers{app}" ||
		ev.Source.Component != "probed" || ev.Source.Host != e.node {
		t.Errorf("event = type %q fieldPath %q source %+v", ev.Type, ev.InvolvedObject.FieldPath, ev.Source)
	}
	n := 0
	for _, x := range e.events(pod.UID) {
		if x.Reason == "Unhealthy" {
			n++
		}
	}
	if n > 2 {
		t.Errorf("%d separate Unhealthy events; identical events must be aggregated", n)
	}
}

// Editing the annotation changes what is probed; deleting the pod stops the
// workers and removes their metric series.
func TestAnnotationEditAndDeletion(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ip := loopbackIP()
	first := startHTTPTarget(t, ip, true)
	second := startHTTPTarget(t, ip, true)
	pod := e.createPod("edited", mustJSON(probes{"app": {
		"readinessProbe": httpProbe(first.Port, "/ready", nil),
		"livenessProbe":  httpProbe(first.Port, "/healthz", map[string]any{"periodSeconds": 3}),
	}}), true, container{name: "app"})
	e.runPod(pod, ip, time.Minute)
	p := e.startProbed("--liveness-action=event-only")
	e.waitCond("edited", "ready.probed.io/app", v1.ConditionTrue, 20*time.Second)

	// Each worker shows up, "pending" until its first probe, then "running".
	eventually(t, "both workers running in /debug/probes", 10*time.Second, func() bool {
		entries := p.debugProbes()
		if len(entries) != 2 {
			return false
		}
		for _, d := range entries {
			if d.PodName != "edited" || d.Container != "app" || d.State != "running" {
				return false
			}
		}
		return true
	})
	eventually(t, "history in /debug/probes", 10*time.Second, func() bool {
		for _, d := range p.debugProbes() {
			if d.ProbeType == "Readiness" && len(d.History) > 0 && d.History[len(d.History)-1].Result == "success" {
				return true
			}
		}
		return false
	})

	// Point readiness at the second target.
	cur := e.pod("edited")
	cur.Annotations["probed.io/probes"] = mustJSON(probes{"app": {
		"readinessProbe": httpProbe(second.Port, "/ready", nil),
		"livenessProbe":  httpProbe(first.Port, "/healthz", map[string]any{"periodSeconds": 3}),
	}})
	if _, err := client.CoreV1().Pods(e.ns).Update(e.ctx, cur, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the second target probed", 10*time.Second, func() bool { return second.hits.Load() >= 2 })
	// The edit must not flip readiness: the condition stays True throughout.
	if !e.condIs("edited", "ready.probed.io/app", v1.ConditionTrue) {
		t.Error("editing the readiness probe flipped the condition")
	}

	if len(p.metricLines(`prober_probe_total{container="app",namespace="`+e.ns+`",pod="edited"`)) == 0 {
		t.Fatal("no series before deletion")
	}
	if err := client.CoreV1().Pods(e.ns).Delete(e.ctx, "edited", metav1.DeleteOptions{GracePeriodSeconds: new(int64)}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "workers gone from /debug/probes", 10*time.Second, func() bool { return len(p.debugProbes()) == 0 })
	eventually(t, "metric series removed", 10*time.Second, func() bool {
		return len(p.metricLines(`prober_probe_total{container="app",namespace="`+e.ns+`",pod="edited"`)) == 0 &&
			len(p.metricLines(`prober_probe_duration_seconds_count{container="app",namespace="`+e.ns+`",pod="edited"`)) == 0
	})
	h := second.hits.Load()
	consistently(t, "no probes after deletion", 2*time.Second, func() bool { return second.hits.Load() == h })
}

// SIGKILL and restart of probed flips no condition of a pod whose container did not restart.
func TestRestartOfProbedFlipsNothing(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ip := loopbackIP()
	app := startHTTPTarget(t, ip, true)
	pod := e.createPod("steady", mustJSON(probes{"app": {
		"readinessProbe": httpProbe(app.Port, "/ready", map[string]any{"periodSeconds": 2}),
		"startupProbe":   httpProbe(app.Port, "/healthz", nil),
	}}), true, container{name: "app"})
	e.runPod(pod, ip, time.Minute)
	p := e.startProbed()
	e.waitCond("steady", "probed.io/ready", v1.ConditionTrue, 20*time.Second)

	ctx, cancel := context.WithCancel(e.ctx)
	defer cancel()
	w, err := client.CoreV1().Pods(e.ns).Watch(ctx, metav1.ListOptions{FieldSelector: "metadata.name=steady", ResourceVersion: e.pod("steady").ResourceVersion})
	if err != nil {
		t.Fatal(err)
	}
	flips := make(chan string, 100)
	go func() {
		for ev := range w.ResultChan() {
			if ev.Type != watch.Modified {
				continue
			}
			pod := ev.Object.(*v1.Pod)
			for _, c := range pod.Status.Conditions {
				if strings.Contains(string(c.Type), "probed.io") && c.Status != v1.ConditionTrue {
					flips <- fmt.Sprintf("%s=%s (%s)", c.Type, c.Status, c.Reason)
				}
			}
		}
	}()
	for i := 0; i < 2; i++ {
		_ = p.Kill()
		p = e.startProbed()
		// Let the new probed probe several times.
		h := app.hits.Load()
		eventually(t, "probes after restart", 20*time.Second, func() bool { return app.hits.Load() >= h+3 })
	}
	select {
	case f := <-flips:
		t.Fatalf("a restart of probed flipped a condition: %s", f)
	default:
	}
	// The container does restart: its conditions must then be re-proven.
	app.Set(false)
	e.restartContainer("steady", "app")
	e.waitCond("steady", "started.probed.io/app", v1.ConditionFalse, 20*time.Second)
	e.waitCond("steady", "ready.probed.io/app", v1.ConditionFalse, 5*time.Second)
}

// --dry-run probes and records metrics, but writes no status and no events.
func TestDryRunWritesNothing(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ip := loopbackIP()
	app := startHTTPTarget(t, ip, false)
	pod := e.createPod("dry", mustJSON(probes{"app": {"readinessProbe": httpProbe(app.Port, "/ready", nil)}}), true, container{name: "app"})
	pod = e.runPod(pod, ip, time.Minute)
	rv := pod.ResourceVersion
	p := e.startProbed("--dry-run")
	eventually(t, "failed probes counted", 20*time.Second, func() bool {
		return len(p.metricLines(`prober_probe_total{container="app",namespace="`+e.ns+`",pod="dry",pod_uid="`+string(pod.UID)+`",probe_type="Readiness",result="failed"}`)) == 1
	})
	h := app.hits.Load()
	eventually(t, "more probes", 10*time.Second, func() bool { return app.hits.Load() >= h+3 })
	if got := e.pod("dry").ResourceVersion; got != rv {
		t.Errorf("dry run wrote the pod: resourceVersion %s -> %s", rv, got)
	}
	if evs := e.events(pod.UID); len(evs) != 0 {
		t.Errorf("dry run emitted %d events, first %q", len(evs), evs[0].Message)
	}
}

// --status-mode=container-status writes containerStatuses ready/started and
// keeps ContainersReady and Ready consistent.
func TestContainerStatusMode(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ip := loopbackIP()
	app := startHTTPTarget(t, ip, true)
	pod := e.createPod("cs", mustJSON(probes{"app": {"readinessProbe": httpProbe(app.Port, "/ready", nil)}}), false, container{name: "app"})
	e.runPod(pod, ip, time.Minute)
	// As if the kubelet had said not ready.
	e.updateStatus("cs", func(p *v1.Pod) {
		f := false
		p.Status.ContainerStatuses[0].Ready = false
		p.Status.ContainerStatuses[0].Started = &f
	})
	e.startProbed("--status-mode=container-status")
	ready := func(want bool) func() bool {
		return func() bool {
			p := e.pod("cs")
			cs := p.Status.ContainerStatuses[0]
			r := condition(p, string(v1.PodReady))
			cr := condition(p, string(v1.ContainersReady))
			wantS := v1.ConditionFalse
			if want {
				wantS = v1.ConditionTrue
			}
			return cs.Ready == want && cs.Started != nil && *cs.Started && r != nil && r.Status == wantS && cr != nil && cr.Status == wantS
		}
	}
	eventually(t, "container ready, ContainersReady and Ready True", 20*time.Second, ready(true))
	app.Set(false)
	eventually(t, "container not ready, conditions False", 20*time.Second, ready(false))
	if condition(e.pod("cs"), "probed.io/ready") != nil {
		t.Error("container-status mode wrote probed's own conditions")
	}
}

// Bad input gets InvalidProbe events and loses nothing: other probes run.
func TestBadInputIsReportedAndContained(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ip := loopbackIP()
	app := startHTTPTarget(t, ip, true)
	good := e.createPod("good", mustJSON(probes{"app": {"readinessProbe": httpProbe(app.Port, "/ready", nil)}}), true, container{name: "app"})
	e.runPod(good, ip, time.Minute)
	cases := []struct{ name, annotation, want string }{
		{"malformed", `{"app": {"readinessProbe": `, "probed.io/probes"},
		{"unknown-container", mustJSON(probes{"ghost": {"readinessProbe": httpProbe(app.Port, "/", nil)}}), "ghost"},
		{"unknown-port", mustJSON(probes{"app": {"readinessProbe": map[string]any{"httpGet": map[string]any{"port": "metrics"}}}}), "metrics"},
		{"bad-threshold", mustJSON(probes{"app": {"livenessProbe": map[string]any{"tcpSocket": map[string]any{"port": 80}, "successThreshold": 2}}}), "successThreshold"},
	}
	var uids []string
	for _, c := range cases {
		p := e.createPod(c.name, c.annotation, true, container{name: "app", ports: []v1.ContainerPort{{Name: "http", ContainerPort: 80}}})
		e.runPod(p, ip, time.Minute)
		uids = append(uids, string(p.UID))
	}
	pr := e.startProbed()
	for i, c := range cases {
		c := c
		eventually(t, "InvalidProbe for "+c.name, 20*time.Second, func() bool {
			ev := e.findEvent(typesUID(uids[i]), "InvalidProbe", c.want)
			return ev != nil && ev.Type == v1.EventTypeWarning
		})
	}
	e.waitCond("unknown-port", "ready.probed.io/app", v1.ConditionFalse, 10*time.Second)
	if c := condition(e.pod("unknown-port"), "ready.probed.io/app"); c.Reason != "InvalidProbe" {
		t.Errorf("invalid readiness probe condition reason %q, want InvalidProbe", c.Reason)
	}
	e.waitCond("good", "probed.io/ready", v1.ConditionTrue, 20*time.Second)
	if code, _ := pr.get("/healthz"); code != http.StatusOK {
		t.Error("probed unhealthy after bad input")
	}
	select {
	case <-pr.Done():
		t.Fatal("probed exited on bad input")
	default:
	}
}
