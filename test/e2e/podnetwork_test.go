//go:build e2e

package e2e

import (
	"encoding/json"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
)

// fromPodProbe is a probe of probed.io/probes with the probed.io/from field.
type fromPodProbe struct {
	v1.Probe `json:",inline"`
	From     string `json:"probed.io/from,omitempty"`
}

// TestProbeFromInsidePod (issue 36): an app whose servers listen only on
// the pod's loopback, adopted with "probed.io/from": "Pod", on a node
// whose probed runs with deploy/pod-netns. Its HTTP readiness and gRPC
// startup probes, sent from inside the pod's network namespace, make it
// Ready; an HTTP liveness probe sent the same way restarts it when
// /healthz starts failing. The kubelet could probe none of these (they go
// to the pod's IP, where nothing listens).
func TestProbeFromInsidePod(t *testing.T) {
	t.Parallel()
	const httpPort, grpcPort = 8080, 9090
	local := []string{"--http=127.0.0.1:8080", "--grpc=127.0.0.1:9090"}

	t.Run("ready", func(t *testing.T) {
		t.Parallel()
		s := newSC(t, "90-from-pod-ready", regular)
		pod := s.newPod("app", target(nil, local...), probes{})
		setFromPodProbes(t, pod, map[string]fromPodProbe{
			"readinessProbe": {Probe: v1.Probe{ProbeHandler: httpGetHandler("/readyz", httpPort), PeriodSeconds: 1}, From: "Pod"},
			"startupProbe":   {Probe: v1.Probe{ProbeHandler: grpcHandler(grpcPort), PeriodSeconds: 1, FailureThreshold: 30}, From: "Pod"},
		})
		s.create(pod)
		p := s.poll("Ready through probes from inside the pod", time.Second, 90*time.Second, func(p *v1.Pod) (bool, error) {
			return isReady(p) && condStatus(p, s.readyCond()) == v1.ConditionTrue && condStatus(p, s.startedCond()) == v1.ConditionTrue, nil
		})
		s.note("ready; %s: %s", s.readyCond(), condition(p, s.readyCond()).Message)
	})

	t.Run("liveness", func(t *testing.T) {
		t.Parallel()
		s := newSC(t, "91-from-pod-liveness", regular)
		pod := s.newPod("app", target(nil, append(local, "--healthz-fail-after=8s")...), probes{})
		setFromPodProbes(t, pod, map[string]fromPodProbe{
			"livenessProbe": {Probe: v1.Probe{ProbeHandler: httpGetHandler("/healthz", httpPort), PeriodSeconds: 1, FailureThreshold: 2}, From: "Pod"},
		})
		s.runLivenessTest(pod, 1, 90*time.Second)
		s.expectEvent(v1.EventTypeNormal, "Killing", "Container app failed liveness probe, will be restarted")
		s.expectEvent(v1.EventTypeWarning, "Unhealthy", "Liveness probe failed: HTTP probe failed with statuscode: 500")
	})
}

// setFromPodProbes replaces the pod's probed.io/probes with probes for its
// one container, which may carry probed.io/from.
func setFromPodProbes(t *testing.T, pod *v1.Pod, probes map[string]fromPodProbe) {
	t.Helper()
	b, err := json.Marshal(map[string]map[string]fromPodProbe{pod.Spec.Containers[0].Name: probes})
	if err != nil {
		t.Fatal(err)
	}
	pod.Annotations["probed.io/probes"] = string(b)
}
