package manager

import (
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/probed-dev/probed/pkg/probespec"
	"github.com/probed-dev/probed/pkg/status"
)

// fakeReachPolicy is the probe-reach policy's state as a test sets it.
type fakeReachPolicy struct {
	mu      sync.Mutex
	unknown bool
	inForce bool
	why     string
}

func (p *fakeReachPolicy) Known() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return !p.unknown
}

func (p *fakeReachPolicy) InForce() (bool, string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.inForce, p.why
}

func (p *fakeReachPolicy) set(unknown, inForce bool, why string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.unknown, p.inForce, p.why = unknown, inForce, why
}

// fakeReachRecorder keeps the latest record asked for per pod.
type fakeReachRecorder struct {
	mu      sync.Mutex
	records map[types.UID]string
	writes  int
}

func (r *fakeReachRecorder) Record(key status.PodKey, record string, _ metav1.Time) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.records == nil {
		r.records = map[types.UID]string{}
	}
	r.records[key.UID] = record
	r.writes++
}

func (r *fakeReachRecorder) Forget(uid types.UID) {
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.records, uid)
}

func (r *fakeReachRecorder) get(uid types.UID) (string, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	v, ok := r.records[uid]
	return v, ok
}

const missingPolicy = "no such ValidatingAdmissionPolicy"

// heldEnv runs a manager whose probe-reach policy is policy.
func heldEnv(t *testing.T, policy *fakeReachPolicy) (*env, *fakeReachRecorder, func() float64) {
	rec := &fakeReachRecorder{}
	e := newEnvWith(t, func(o *Options) {
		o.ReachPolicy, o.ReachRecorder = policy, rec
		o.Metrics = NewMetrics(prometheus.NewRegistry())
	})
	return e, rec, func() float64 { return testutil.ToFloat64(e.mgr.opts.Metrics.unapproved) }
}

// recordOf is the record of a pod as it declares its probes now.
func recordOf(t *testing.T, pod *v1.Pod) string {
	t.Helper()
	r, err := probespec.PodReach(pod)
	if err != nil {
		t.Fatal(err)
	}
	return r.String()
}

func withProbes(pod *v1.Pod, probes map[string]map[string]any) *v1.Pod {
	p := pod.DeepCopy()
	p.Annotations[probespec.ProbesAnnotation] = annotate(probes)
	return p
}

const token = "cat /var/run/secrets/kubernetes.io/serviceaccount/token; exit 1"

func (e *env) refused(container, field string) func() bool {
	return func() bool {
		return containsPrefix(e.rec.messages(ReasonInvalidProbe), `container "`+container+`" `+field+`: Forbidden: changed after probed first saw the pod, while the probe-reach admission policy is not in force (`+missingPolicy+`)`)
	}
}

// Issue 30, item 8: while the probe-reach policy is not in force, an edit
// that adds or changes what a running pod's probes run, or where they
// connect, is not run, whatever probed.io/approved-reach says (anyone may
// write it then): an InvalidProbe says why. What the pod had when probed
// first saw it runs, timing edits of it take effect, and the record goes
// into the pod's status.
func TestHeldReachWithoutThePolicy(t *testing.T) {
	e, rec, gauge := heldEnv(t, &fakeReachPolicy{why: missingPolicy})
	created := map[string]map[string]any{"app": {"livenessProbe": execProbe("cat", "/tmp/healthy"), "readinessProbe": tcp1}}
	pod := runningPod("p", "u1", annotate(created), "app")
	e.create(pod)
	e.eventually("the probes it was created with run", func() bool {
		w := e.workers()
		return strings.Contains(w["p/app/Liveness"], "exec [cat /tmp/healthy]") && w["p/app/Readiness"] != ""
	})
	e.eventually("the record in the pod's status", func() bool {
		v, ok := rec.get("u1")
		return ok && v == recordOf(t, pod) && strings.HasPrefix(v, "v1,app/livenessProbe=")
	})

	// A patch adding an exec readiness probe, approved by the patcher.
	edited := withProbes(pod, map[string]map[string]any{"app": {"livenessProbe": execProbe("cat", "/tmp/healthy"), "readinessProbe": execProbe("sh", "-c", token)}})
	forged, err := probespec.ApproveReach(edited)
	if err != nil {
		t.Fatal(err)
	}
	edited.Annotations[probespec.ApprovedReachAnnotation] = forged
	e.update(edited)
	e.eventually("the InvalidProbe", e.refused("app", "readinessProbe: exec.command"))
	e.eventually("readiness False, InvalidProbe; the gauge", func() bool {
		st, ok := e.sink.get("u1")
		return ok && gauge() == 1 && !st.Containers[0].Ready && st.Containers[0].ReadyReason == status.ReasonInvalidProbe
	})
	for k, spec := range e.workers() {
		if strings.Contains(spec, "token") {
			t.Errorf("worker %s runs %q", k, spec)
		}
	}

	// Timing of the recorded probe stays free; its command does not.
	timed := withProbes(edited, map[string]map[string]any{"app": {
		"livenessProbe":  map[string]any{"exec": map[string]any{"command": []string{"cat", "/tmp/healthy"}}, "periodSeconds": 7},
		"readinessProbe": tcp1,
	}})
	e.update(timed)
	e.eventually("the slower liveness probe, and nothing refused", func() bool {
		return strings.Contains(e.workers()["p/app/Liveness"], "period=7s") && gauge() == 0
	})
	// With the approval removed, which anyone may do without the policy.
	changed := withProbes(timed, map[string]map[string]any{"app": {"livenessProbe": execProbe("sh", "-c", token), "readinessProbe": tcp1}})
	delete(changed.Annotations, probespec.ApprovedReachAnnotation)
	e.update(changed)
	e.eventually("the changed command refused", e.refused("app", "livenessProbe: exec.command"))
	if spec := e.workers()["p/app/Liveness"]; spec != "" {
		t.Errorf("the changed liveness probe runs: %q", spec)
	}
	if v, _ := rec.get("u1"); v != recordOf(t, pod) {
		t.Errorf("the record changed to %q; want what the pod had when first seen", v)
	}
}

// A pod without probes is recorded too while the policy is not in force:
// an exec probe added to it later is not run.
func TestHeldReachOfAPodWithoutProbes(t *testing.T) {
	policy := &fakeReachPolicy{inForce: true}
	e, rec, _ := heldEnv(t, policy)
	pod := runningPod("p", "u1", "", "app")
	e.create(pod)
	time.Sleep(100 * time.Millisecond)
	if _, ok := rec.get("u1"); ok {
		t.Error("a record of a pod without probes while the policy is in force")
	}
	policy.set(false, false, missingPolicy)
	e.mgr.ResyncAll()
	e.eventually("the empty record", func() bool { v, ok := rec.get("u1"); return ok && v == "v1" })
	e.update(withProbes(pod, map[string]map[string]any{"app": {"livenessProbe": execProbe("sh", "-c", token)}}))
	e.eventually("the InvalidProbe", e.refused("app", "livenessProbe: exec.command"))
	if n := e.mgr.WorkerCount(); n != 0 {
		t.Errorf("%d workers", n)
	}
}

// The record in the pod's status holds across a restart of probed: an
// edit made while probed was down is refused by the next probed, and a pod
// created meanwhile runs what it was created with.
func TestHeldReachAcrossARestart(t *testing.T) {
	e, rec, _ := heldEnv(t, &fakeReachPolicy{why: missingPolicy})
	created := map[string]map[string]any{"app": {"livenessProbe": execProbe("cat", "/tmp/healthy")}}
	seen := runningPod("p", "u1", annotate(created), "app")
	seen.Status.Conditions = []v1.PodCondition{{Type: status.ReachConditionType, Status: v1.ConditionTrue,
		Reason: status.ReasonReachRecorded, Message: recordOf(t, seen), LastTransitionTime: metav1.NewTime(time.Now().Add(-time.Hour))}}
	e.create(withProbes(seen, map[string]map[string]any{"app": {"livenessProbe": execProbe("sh", "-c", token)}}))
	newer := runningPod("q", "u2", annotate(created), "app")
	e.create(newer)
	e.eventually("the pod created while probed was down runs its probe", func() bool {
		return strings.Contains(e.workers()["q/app/Liveness"], "exec [cat /tmp/healthy]")
	})
	e.eventually("the edit made while probed was down refused", e.refused("app", "livenessProbe: exec.command"))
	if spec := e.workers()["p/app/Liveness"]; spec != "" {
		t.Errorf("the edited probe runs: %q", spec)
	}
	if v, ok := rec.get("u2"); !ok || v != recordOf(t, newer) {
		t.Errorf("record of the new pod %q %v", v, ok)
	}
	if _, ok := rec.get("u1"); ok {
		t.Error("the record already in the pod's status was written again")
	}
}

// While the policy is in force the record follows the pod's approved
// probes, so an edit a pods/exec user made then still runs once the
// policy is gone; a probe the approval did not cover is never recorded.
func TestHeldReachFollowsWhileInForce(t *testing.T) {
	policy := &fakeReachPolicy{inForce: true}
	e, rec, _ := heldEnv(t, policy)
	pod := stampedPod(t, "p", "u1", map[string]map[string]any{"app": {"livenessProbe": execProbe("cat", "/a")}})
	e.create(pod)
	e.eventually("the first record", func() bool { v, ok := rec.get("u1"); return ok && v == recordOf(t, pod) })

	// A pods/exec user's edit, approved.
	approvedEdit := stampedPod(t, "p", "u1", map[string]map[string]any{"app": {"livenessProbe": execProbe("cat", "/b"), "readinessProbe": execProbe("cat", "/c")}})
	// A patch-only user's edit of the readiness probe, not covered.
	unapproved := withProbes(approvedEdit, map[string]map[string]any{"app": {"livenessProbe": execProbe("cat", "/b"), "readinessProbe": execProbe("sh", "-c", token)}})
	e.update(approvedEdit)
	e.eventually("the approved edit runs", func() bool { return strings.Contains(e.workers()["p/app/Readiness"], "cat /c") })
	e.update(unapproved)
	e.eventually("the unapproved edit refused by its approval", func() bool {
		return containsPrefix(e.rec.messages(ReasonInvalidProbe), `container "app" readinessProbe: exec.command: Forbidden: changed after the pod was created without pods/exec approval`)
	})
	if v, _ := rec.get("u1"); v != recordOf(t, approvedEdit) {
		t.Errorf("record %q; want the approved edit's %q", v, recordOf(t, approvedEdit))
	}

	// The policy goes; the approval is anyone's now.
	policy.set(false, false, missingPolicy)
	e.mgr.ResyncAll()
	forged := unapproved.DeepCopy()
	v, err := probespec.ApproveReach(forged)
	if err != nil {
		t.Fatal(err)
	}
	forged.Annotations[probespec.ApprovedReachAnnotation] = v
	e.update(forged)
	e.eventually("the forged approval does not help", e.refused("app", "readinessProbe: exec.command"))
	if w := e.workers(); !strings.Contains(w["p/app/Liveness"], "cat /b") || w["p/app/Readiness"] != "" {
		t.Errorf("workers %v; want the approved liveness probe alone", w)
	}

	// Back in force: the approval decides again, and the record follows.
	policy.set(false, true, "")
	e.mgr.ResyncAll()
	e.eventually("the approved probe runs", func() bool { return strings.Contains(e.workers()["p/app/Readiness"], "token") })
	e.eventually("the record follows", func() bool { v, _ := rec.get("u1"); return v == recordOf(t, forged) })
}

// probed judges no pod before it knows the policy's state, so a restart
// never refuses, for a moment, what the policy admitted.
func TestManagerWaitsForThePolicy(t *testing.T) {
	policy := &fakeReachPolicy{unknown: true}
	e, _, _ := heldEnv(t, policy)
	e.create(runningPod("p", "u1", annotate(map[string]map[string]any{"app": {"readinessProbe": tcp1}}), "app"))
	time.Sleep(200 * time.Millisecond)
	if n := e.mgr.WorkerCount(); n != 0 {
		t.Fatalf("%d workers before the policy was known", n)
	}
	policy.set(false, true, "")
	e.eventually("the worker", func() bool { return e.mgr.WorkerCount() == 1 })
}
