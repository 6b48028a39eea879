package manager

import (
	"context"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/probed-dev/probed/pkg/probespec"
	"github.com/probed-dev/probed/pkg/status"
)

// stampedPod is a running pod whose probes are approved as created.
func stampedPod(t *testing.T, name, uid string, probes map[string]map[string]any) *v1.Pod {
	t.Helper()
	p := runningPod(name, uid, annotate(probes), "app")
	v, err := probespec.ApproveReach(p)
	if err != nil {
		t.Fatal(err)
	}
	p.Annotations[probespec.ApprovedReachAnnotation] = v
	return p
}

func execProbe(cmd ...string) map[string]any {
	return map[string]any{"exec": map[string]any{"command": cmd}, "periodSeconds": 1}
}

// TestUnapprovedReachIsNotRun (issue 20, item 1): an edit of a running
// pod that adds or changes an exec handler, or points a probe elsewhere,
// without the approval a pods/exec user's edit carries, runs nothing of
// it: an InvalidProbe naming the container, the probe and why, readiness
// False with reason InvalidProbe, the gauge. The pod's other probes run,
// and edits of timing on approved probes take effect.
func TestUnapprovedReachIsNotRun(t *testing.T) {
	e := newEnvWith(t, func(o *Options) { o.Metrics = NewMetrics(prometheus.NewRegistry()) })
	gauge := func() float64 { return testutil.ToFloat64(e.mgr.opts.Metrics.unapproved) }
	pod := stampedPod(t, "p", "u1", map[string]map[string]any{"app": {
		"livenessProbe":  execProbe("cat", "/tmp/healthy"),
		"readinessProbe": tcp1,
	}})
	e.create(pod)
	e.eventually("both probes run", func() bool {
		w := e.workers()
		return strings.Contains(w["p/app/Liveness"], "exec [cat /tmp/healthy]") && w["p/app/Readiness"] != ""
	})

	// A metadata-only update by someone who may patch the pod.
	const token = "cat /var/run/secrets/kubernetes.io/serviceaccount/token; exit 1"
	edited := pod.DeepCopy()
	edited.Annotations[probespec.ProbesAnnotation] = annotate(map[string]map[string]any{"app": {
		"livenessProbe":  execProbe("cat", "/tmp/healthy"),
		"readinessProbe": execProbe("sh", "-c", token),
		"startupProbe":   map[string]any{"httpGet": map[string]any{"port": 80, "host": "10.0.0.9"}},
	}})
	e.update(edited)
	e.eventually("the unapproved probes refused", func() bool {
		st, ok := e.sink.get("u1")
		return ok && gauge() == 2 && len(st.Containers) == 1 && !st.Containers[0].Ready &&
			st.Containers[0].ReadyReason == status.ReasonInvalidProbe
	})
	for k, spec := range e.workers() {
		if strings.Contains(spec, "token") || k == "p/app/Startup" {
			t.Errorf("worker %s runs %q", k, spec)
		}
	}
	if e.workers()["p/app/Liveness"] == "" {
		t.Error("the approved liveness probe stopped")
	}
	// The events may land after the status the condition above waited for.
	wants := []string{
		`container "app" readinessProbe: exec.command: Forbidden: changed after the pod was created without pods/exec approval`,
		`container "app" startupProbe: httpGet.host, httpGet.port, httpGet.path, httpGet.scheme: Forbidden: changed after the pod was created without pods/exec approval`,
	}
	e.eventually("an InvalidProbe event for each unapproved probe", func() bool {
		msgs := e.rec.messages(ReasonInvalidProbe)
		for _, want := range wants {
			if !containsPrefix(msgs, want) {
				return false
			}
		}
		return true
	})

	// Free edits of the approved probe take effect.
	timed := edited.DeepCopy()
	timed.Annotations[probespec.ProbesAnnotation] = annotate(map[string]map[string]any{"app": {
		"livenessProbe":  map[string]any{"exec": map[string]any{"command": []string{"cat", "/tmp/healthy"}}, "periodSeconds": 7, "failureThreshold": 9, "timeoutSeconds": 3},
		"readinessProbe": map[string]any{"tcpSocket": map[string]any{"port": 2}, "periodSeconds": 2},
	}})
	e.update(timed)
	e.eventually("the edited period and thresholds, and the unapproved probes gone", func() bool {
		w := e.workers()
		return strings.Contains(w["p/app/Liveness"], "timeout=3s period=7s #success=1 #failure=9") &&
			strings.Contains(w["p/app/Readiness"], "tcp-socket :2") && gauge() == 0
	})

	// The gauge forgets a pod that goes.
	e.update(edited)
	e.eventually("refused again", func() bool { return gauge() == 2 })
	if err := e.client.CoreV1().Pods("ns").Delete(context.Background(), "p", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	e.eventually("the gauge back to 0", func() bool { return gauge() == 0 })
}

// TestRequireApprovedReach: with --require-approved-reach a pod without
// probed.io/approved-reach runs no probe with reach; probes without reach,
// and approved pods, run.
func TestRequireApprovedReach(t *testing.T) {
	e := newEnvWith(t, func(o *Options) { o.RequireApprovedReach = true })
	probes := map[string]map[string]any{"app": {"livenessProbe": execProbe("true"), "readinessProbe": tcp1}}
	e.create(runningPod("bare", "u1", annotate(probes), "app"))
	e.create(stampedPod(t, "approved", "u2", probes))
	e.eventually("the approved pod's probes and the bare pod's tcp probe", func() bool {
		w := e.workers()
		return w["approved/app/Liveness"] != "" && w["approved/app/Readiness"] != "" && w["bare/app/Readiness"] != ""
	})
	e.eventually("an InvalidProbe for the bare pod's exec probe", func() bool {
		return containsPrefix(e.rec.messages(ReasonInvalidProbe),
			`container "app" livenessProbe: exec.command: Forbidden: the pod has no probed.io/approved-reach, and this node runs with --require-approved-reach`)
	})
	if e.workers()["bare/app/Liveness"] != "" {
		t.Error("the bare pod's exec probe runs")
	}
}

func containsPrefix(msgs []string, prefix string) bool {
	for _, m := range msgs {
		if strings.HasPrefix(m, prefix) {
			return true
		}
	}
	return false
}
