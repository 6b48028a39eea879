//go:build integration

package integration

import (
	"context"
	"fmt"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
)

// containerStatusState is what container-status mode writes: each
// container's ready and started, and the pod's ContainersReady and Ready.
func containerStatusState(p *v1.Pod) map[string]string {
	out := map[string]string{}
	for _, cs := range p.Status.ContainerStatuses {
		out[cs.Name+".ready"] = fmt.Sprint(cs.Ready)
		out[cs.Name+".started"] = fmt.Sprint(cs.Started != nil && *cs.Started)
	}
	for _, t := range []v1.PodConditionType{v1.ContainersReady, v1.PodReady} {
		if c := condition(p, string(t)); c != nil {
			out[string(t)] = string(c.Status)
		}
	}
	return out
}

// Issue 11 item 6: in container-status mode a restart of probed keeps the
// ready and started values of containers that did not restart. probed is
// SIGKILLed and started again; no ready, started, ContainersReady or Ready
// of a healthy pod moves, while the new probed probes them again.
func TestContainerStatusModeSurvivesSIGKILL(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ip := loopbackIP()
	const n = 5
	var targets []*httpTarget
	for i := range n {
		tg := startHTTPTarget(t, ip, true)
		targets = append(targets, tg)
		name := fmt.Sprintf("cs-%d", i)
		pod := e.createPod(name, mustJSON(probes{"app": {
			"readinessProbe": httpProbe(tg.Port, "/ready", nil),
			"startupProbe":   httpProbe(tg.Port, "/ready", nil),
		}}), false, container{name: "app"})
		e.runPod(pod, ip, time.Minute)
		// As the node would report a container nobody has judged yet.
		e.updateStatus(name, func(p *v1.Pod) {
			f := false
			p.Status.ContainerStatuses[0].Ready = false
			p.Status.ContainerStatuses[0].Started = &f
		})
	}
	allReady := func() bool {
		for i := range n {
			p := e.pod(fmt.Sprintf("cs-%d", i))
			cs := p.Status.ContainerStatuses[0]
			r := condition(p, string(v1.PodReady))
			if !cs.Ready || cs.Started == nil || !*cs.Started || r == nil || r.Status != v1.ConditionTrue {
				return false
			}
		}
		return true
	}
	p := e.startProbed("--status-mode=container-status")
	eventually(t, "every container ready and started", 30*time.Second, allReady)

	ctx, cancel := context.WithCancel(e.ctx)
	defer cancel()
	rec := e.watchPodState(ctx, containerStatusState)
	_ = p.Kill()
	hits := make([]int64, n)
	for i, tg := range targets {
		hits[i] = tg.hits.Load()
	}
	p = e.startProbed("--status-mode=container-status")
	// The new probed has probed every container again (readiness runs
	// every second) and written what it wanted to.
	eventually(t, "every container probed by the new probed", 30*time.Second, func() bool {
		for i, tg := range targets {
			if tg.hits.Load() < hits[i]+3 {
				return false
			}
		}
		return true
	})
	if flips := rec.all(); len(flips) != 0 {
		t.Errorf("a restart of probed flipped container status:\n%v", flips)
	}
	if !allReady() {
		t.Error("not every container is ready after the restart")
	}
}

// Issue 11 item 5: a condition's message belongs to the result that decided
// it. A readiness probe failing from its first run shows that run's output
// (before the fix: an empty message for good), and the flip back to
// success carries no failure text (nor the success's body).
func TestConditionMessageBelongsToItsResult(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ip := loopbackIP()
	tg := startHTTPTarget(t, ip, false)
	pod := e.createPod("msg", mustJSON(probes{"app": {"readinessProbe": httpProbe(tg.Port, "/ready", map[string]any{"failureThreshold": 1})}}), true, container{name: "app"})
	e.runPod(pod, ip, time.Minute)
	e.startProbed()
	eventually(t, "ProbeFailed with the first probe's output", 30*time.Second, func() bool {
		c := condition(e.pod("msg"), "ready.probed.io/app")
		return c != nil && c.Reason == "ProbeFailed" && c.Message == "HTTP probe failed with statuscode: 503"
	})
	tg.Set(true)
	e.waitCond("msg", "ready.probed.io/app", v1.ConditionTrue, 20*time.Second)
	if c := condition(e.pod("msg"), "ready.probed.io/app"); c.Reason != "ProbeSucceeded" || c.Message != "probe succeeded" {
		t.Errorf("after the flip: reason %q message %q; want ProbeSucceeded with the fixed text", c.Reason, c.Message)
	}
}
