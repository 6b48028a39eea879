package manager

import (
	"testing"

	"github.com/probed-dev/probed/pkg/probespec"
	"github.com/probed-dev/probed/pkg/results"
	"github.com/probed-dev/probed/pkg/status"
)

// Stopping the manager stops every worker; their exits must not hand the
// writer a status without their probes, which would remove the pod's
// conditions and report it ready (NoGatingProbes) on probed's way out.
func TestShutdownKeepsLastDecidedStatus(t *testing.T) {
	e := newEnv(t, probespec.ProbeSourceAnnotation)
	pod := runningPod("p", "u-stop", annotate(map[string]map[string]any{"app": {"readinessProbe": tcp1}}), "app")
	e.prober.mu.Lock()
	e.prober.result["containerd://u-stop-app"] = results.Failure
	e.prober.mu.Unlock()
	e.create(pod)
	notReady := func(st status.PodState) bool {
		return len(st.Containers) == 1 && st.Containers[0].HasReadiness && !st.Containers[0].Ready &&
			st.Containers[0].ReadyReason == status.ReasonProbeFailed
	}
	e.eventually("not ready", func() bool { st, _ := e.sink.get("u-stop"); return notReady(st) })

	e.cancel()
	<-e.done
	if st, _ := e.sink.get("u-stop"); !notReady(st) {
		t.Errorf("after shutdown the desired state is %+v; want the last decided one (app not ready)", st)
	}
}
