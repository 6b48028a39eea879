//go:build integration

package integration

import (
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// The restart guard (docs/security.md) against the real API server: its
// Warning events and metrics. This tier has no runtime (--runtime-type=none),
// so allowed kills fail at the runtime and are retried; what matters here is
// which kills the guard lets through to the runtime and what it reports. The
// end-to-end tier checks real restarts.

func failingLiveness(port int) map[string]any {
	return httpProbe(port, "/healthz", map[string]any{"failureThreshold": 1})
}

// ownBy makes the pod a replica of the named apps/v1 controller.
func (e *testEnv) ownBy(name, kind, owner string) {
	e.t.Helper()
	p := e.pod(name)
	yes := true
	p.OwnerReferences = []metav1.OwnerReference{{
		APIVersion: "apps/v1", Kind: kind, Name: owner, UID: types.UID("uid-" + e.ns + "-" + owner), Controller: &yes,
	}}
	if _, err := client.CoreV1().Pods(e.ns).Update(e.ctx, p, metav1.UpdateOptions{}); err != nil {
		e.t.Fatal(err)
	}
}

// countEvents counts a pod's events of reason, aggregated ones included.
func (e *testEnv) countEvents(uid types.UID, reason string) int {
	n := 0
	for _, ev := range e.events(uid) {
		if ev.Reason == reason {
			n += max(int(ev.Count), 1)
		}
	}
	return n
}

// TestWorkloadGuardPausesRestarts: two replicas of a ReplicaSet fail
// liveness together; one restart goes to the runtime, the other is paused
// with a RestartsPaused event, and the paused-workloads gauge shows it.
func TestWorkloadGuardPausesRestarts(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ip := loopbackIP()
	sick := startHTTPTarget(t, ip, true)
	var pods []string
	for _, name := range []string{"web-1", "web-2"} {
		e.createPod(name, mustJSON(probes{"app": {"livenessProbe": failingLiveness(sick.Port)}}), false, container{name: "app"})
		e.ownBy(name, "ReplicaSet", "web")
		e.runPod(e.pod(name), ip, time.Minute)
		pods = append(pods, name)
	}
	p := e.startProbed("--liveness-restart-budget=0")
	eventually(t, "liveness probed", 20*time.Second, func() bool { return sick.hits.Load() >= 2 })
	sick.Set(false)

	want := "liveness failing on 2 of 2 pods of ReplicaSet " + e.ns + "/web on this node; pausing restarts"
	eventually(t, "a RestartsPaused event", 20*time.Second, func() bool {
		for _, name := range pods {
			if ev := e.findEvent(e.pod(name).UID, "RestartsPaused", want); ev != nil && ev.Type == "Warning" {
				return true
			}
		}
		return false
	})
	eventually(t, "paused workloads gauge", 10*time.Second, func() bool {
		return len(p.metricLines("probed_restarts_paused_workloads 1")) == 1
	})
	eventually(t, "deferral counted", 10*time.Second, func() bool {
		return len(p.metricLines(`probed_restarts_deferred_total{reason="workload_guard"} `)) == 1 &&
			!strings.HasSuffix(p.metricLines(`probed_restarts_deferred_total{reason="workload_guard"} `)[0], " 0")
	})
	// Only one replica's kill ever reached the runtime (it fails there and
	// is retried, so it may have several Killing events); the other paused.
	killed := 0
	for _, name := range pods {
		if e.countEvents(e.pod(name).UID, "Killing") > 0 {
			killed++
		}
	}
	if killed != 1 {
		t.Errorf("%d replicas had a kill sent to the runtime; want 1 (the other paused)", killed)
	}
}

// TestRestartBudgetDefers: with a budget of one restart a minute, a second
// pod's liveness restart is deferred with a RestartBudgetExceeded event.
func TestRestartBudgetDefers(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ip := loopbackIP()
	sick := startHTTPTarget(t, ip, false)
	var uids []types.UID
	for _, name := range []string{"a", "b"} {
		pod := e.createPod(name, mustJSON(probes{"app": {"livenessProbe": failingLiveness(sick.Port)}}), false, container{name: "app"})
		e.runPod(pod, ip, time.Minute)
		uids = append(uids, pod.UID)
	}
	p := e.startProbed("--liveness-restart-budget=1")
	want := "the node's restart budget of 1 per minute is spent; restart of container app after its liveness probe failure deferred"
	eventually(t, "a RestartBudgetExceeded event", 20*time.Second, func() bool {
		for _, uid := range uids {
			if e.findEvent(uid, "RestartBudgetExceeded", want) != nil {
				return true
			}
		}
		return false
	})
	eventually(t, "deferral counted", 10*time.Second, func() bool {
		l := p.metricLines(`probed_restarts_deferred_total{reason="budget"} `)
		return len(l) == 1 && !strings.HasSuffix(l[0], " 0")
	})
	// One token, one kill decision in the first minute: only one pod is
	// ever killed. Its stop fails here (no runtime), and its retries, each
	// with its Killing event as the kubelet's, take no further token; the
	// other pod's restart stays deferred.
	consistently(t, "Killing events for one pod only", 3*time.Second, func() bool {
		killed := 0
		for _, uid := range uids {
			if e.countEvents(uid, "Killing") > 0 {
				killed++
			}
		}
		return killed <= 1
	})
}
