package manager

import (
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"

	"github.com/probed-dev/probed/pkg/hostpolicy"
	"github.com/probed-dev/probed/pkg/probespec"
	"github.com/probed-dev/probed/pkg/worker"
)

// Issue 36: a probe sent from inside the pod runs only where the node
// allows it (--pod-network-probes); elsewhere it is an InvalidProbe. The
// host policy does not judge its loopback host: that is the pod's, not
// the node's.
func TestPodNetworkProblems(t *testing.T) {
	pod := runningPod("p", "u1", "", "app")
	pod.Status.PodIP = "10.1.0.5"
	pod.Status.PodIPs = []v1.PodIP{{IP: "10.1.0.5"}}
	fromPod := tcpHost("127.0.0.1")
	fromPod["probed.io/from"] = "Pod"
	pod.Annotations = map[string]string{probespec.ProbesAnnotation: annotate(map[string]map[string]any{"app": {
		"readinessProbe": fromPod,
		"livenessProbe":  tcpHost("10.1.0.5"),
	}})}
	declared, problems := probespec.DeclaredProbes(pod, probespec.ProbeSourceAnnotation)
	if len(declared) != 2 || len(problems) != 0 {
		t.Fatalf("declared %v, problems %v", declared, problems)
	}

	kept, problems := podNetworkProblems(false, declared, nil)
	if len(kept) != 1 || kept[0].FromPod || len(problems) != 1 {
		t.Fatalf("off: kept %v, problems %v; want only the probe from the node", kept, problems)
	}
	if got, want := problems[0].String(), `container "app" readinessProbe: probed.io/from: Forbidden: probes from inside the pod are not enabled on this node (probed's --pod-network-probes)`; got != want {
		t.Errorf("problem %q; want %q", got, want)
	}
	if kept, problems := podNetworkProblems(true, declared, nil); len(kept) != 2 || len(problems) != 0 {
		t.Errorf("on: kept %d, problems %v", len(kept), problems)
	}

	kept, problems = hostPolicyProblems(testGuard(hostpolicy.DenyNodeLocal), pod, worker.PodIPs(pod), declared, nil)
	if len(kept) != 2 || len(problems) != 0 {
		t.Errorf("host policy: kept %d, problems %v; the pod's loopback is not the node's", len(kept), problems)
	}
}

// In the manager: with the switch off, the readiness condition says why.
func TestPodNetworkOffInManager(t *testing.T) {
	e := newEnv(t, probespec.ProbeSourceAnnotation)
	fromPod := tcpHost("")
	fromPod["probed.io/from"] = "Pod"
	pod := runningPod("p", "u1", annotate(map[string]map[string]any{"app": {"readinessProbe": fromPod}}), "app")
	e.create(pod)
	e.eventually("InvalidProbe condition", func() bool {
		c, ok := e.sink.container("u1", "app")
		return ok && !c.Ready && c.ReadyReason == "InvalidProbe" && strings.Contains(c.ReadyMessage, "--pod-network-probes")
	})
	if w := e.workers(); len(w) != 0 {
		t.Errorf("workers = %v; want none", w)
	}
}
