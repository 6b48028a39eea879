//go:build integration

package integration

import (
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
)

// Issue 11 item 1, the kubelet's UpdatePodStatus trigger: a container seen
// running whose readiness result is not Success gets its readiness probe at
// once. With a 30 s period and no initial delay the condition turns True
// within about a second of the container running, at first start and on
// every restart; without the trigger each would wait for the worker's tick,
// anywhere in the 30 s (so all four within the deadline would be luck of
// well under 1 %).
func TestReadinessRunsWhenTheContainerStarts(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ip := loopbackIP()
	target := startHTTPTarget(t, ip, true)
	pod := e.createPod("trigger", mustJSON(probes{
		"app": {"readinessProbe": map[string]any{"httpGet": map[string]any{"path": "/ready", "port": target.Port}, "periodSeconds": 30}},
	}), true, container{name: "app"})
	e.startProbed()
	// probed has its worker and has written the not-running condition.
	eventually(t, "the container-not-running condition", 30*time.Second, func() bool {
		c := condition(e.pod(pod.Name), "ready.probed.io/app")
		return c != nil && c.Reason == "ContainerNotRunning"
	})

	const deadline = 5 * time.Second
	// Each new container instance gets its own probe (a request on the
	// target) within the deadline, and the condition is True.
	measure := func(what string, start func()) {
		t.Helper()
		hits := target.hits.Load()
		began := time.Now()
		start()
		eventually(t, what, deadline, func() bool {
			return target.hits.Load() > hits && e.condIs(pod.Name, "ready.probed.io/app", v1.ConditionTrue)
		})
		t.Logf("%s: probed and True %v after the container ran (period 30s)", what, time.Since(began).Round(10*time.Millisecond))
	}
	measure("first start", func() { e.runPod(pod, ip, 0) })
	for i := range 3 {
		measure("restart "+itoa(int64(i+1)), func() { e.restartContainer(pod.Name, "app") })
	}
}
