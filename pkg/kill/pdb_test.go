package kill

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	v1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/probed-dev/probed/pkg/kubeclient/fromclientset"
	"github.com/probed-dev/probed/pkg/probespec"
)

func pdbFor(name string, allowed, current, desired int32) *policyv1.PodDisruptionBudget {
	one := intstr.FromInt32(1)
	return &policyv1.PodDisruptionBudget{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, UID: types.UID("uid-" + name), Generation: 1},
		Spec:       policyv1.PodDisruptionBudgetSpec{MaxUnavailable: &one, Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}}},
		Status:     policyv1.PodDisruptionBudgetStatus{ObservedGeneration: 1, DisruptionsAllowed: allowed, CurrentHealthy: current, DesiredHealthy: desired, ExpectedPods: current},
	}
}

func webPod(name string, ready bool) *v1.Pod {
	st := v1.ConditionFalse
	if ready {
		st = v1.ConditionTrue
	}
	return &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, UID: types.UID("pod-" + name), Labels: map[string]string{"app": "web"}},
		Status: v1.PodStatus{
			Conditions:        []v1.PodCondition{{Type: v1.PodReady, Status: st}},
			ContainerStatuses: []v1.ContainerStatus{{Name: "app", RestartCount: 0}},
		},
	}
}

// judge is the Eviction API's rule with the disruptions in flight counted
// as spent.
func TestJudge(t *testing.T) {
	always := policyv1.AlwaysAllow
	for _, tc := range []struct {
		name          string
		pdb           *policyv1.PodDisruptionBudget
		ready         bool
		inFlight      int32
		allowed, want bool // want: spends a disruption
	}{
		{"healthy pod, one to spare", pdbFor("p", 1, 5, 4), true, 0, true, true},
		{"healthy pod, the spare one in flight elsewhere", pdbFor("p", 1, 5, 4), true, 1, false, false},
		{"healthy pod, two to spare, one in flight", pdbFor("p", 2, 5, 3), true, 1, true, true},
		{"healthy pod, none to spare", pdbFor("p", 0, 4, 4), true, 0, false, false},
		{"unhealthy pod, workload at its budget without it (IfHealthyBudget)", pdbFor("p", 0, 4, 4), false, 0, true, false},
		{"unhealthy pod, workload below its budget (IfHealthyBudget)", pdbFor("p", 0, 3, 4), false, 0, false, false},
		{"unhealthy pod, budget met only counting a restart in flight", pdbFor("p", 0, 4, 4), false, 1, false, false},
		{"every pod unhealthy", pdbFor("p", 0, 0, 4), false, 0, false, false},
		{"unhealthy pod under AlwaysAllow", func() *policyv1.PodDisruptionBudget {
			p := pdbFor("p", 0, 0, 4)
			p.Spec.UnhealthyPodEvictionPolicy = &always
			return p
		}(), false, 3, true, false},
		{"healthy pod under AlwaysAllow still needs a spare", func() *policyv1.PodDisruptionBudget {
			p := pdbFor("p", 0, 4, 4)
			p.Spec.UnhealthyPodEvictionPolicy = &always
			return p
		}(), true, 0, false, false},
		{"status not yet recounted", func() *policyv1.PodDisruptionBudget {
			p := pdbFor("p", 3, 5, 2)
			p.Generation = 2
			return p
		}(), true, 0, false, false},
	} {
		j := judge(tc.pdb, webPod("w", tc.ready), tc.inFlight)
		if j.Allowed != tc.allowed || j.Spend != tc.want {
			t.Errorf("%s: allowed %v spend %v (%s); want %v %v", tc.name, j.Allowed, j.Spend, j.Why, tc.allowed, tc.want)
		}
		if !j.Allowed && !strings.Contains(j.Why, "PodDisruptionBudget ns/p") {
			t.Errorf("%s: reason %q does not name the PDB", tc.name, j.Why)
		}
	}
}

// Right after a kubelet restart, its Pods API says Ready=False for every
// pod it has not synced yet ("Kubelet is initializing pod containers").
// That is the kubelet not knowing, not the pod failing: its restart needs
// a disruption to spare, as when it was Ready, even under AlwaysAllow.
func TestJudgeKubeletInitializingIsNotUnhealthy(t *testing.T) {
	always := policyv1.AlwaysAllow
	pod := webPod("w", false)
	pod.Status.Conditions[0].Reason, pod.Status.Conditions[0].Message = "ContainersNotReady", "Kubelet is initializing pod containers"
	pdb := pdbFor("p", 0, 4, 4)
	pdb.Spec.UnhealthyPodEvictionPolicy = &always
	if j := judge(pdb, pod, 0); j.Allowed {
		t.Errorf("a pod the kubelet is still initializing was restarted with no disruption to spare (%+v)", j)
	}
	if j := judge(pdbFor("p", 1, 5, 4), pod, 0); !j.Allowed || !j.Spend {
		t.Errorf("with one to spare: %+v, want allowed, spending it", j)
	}
	// A pod the kubelet has synced and found not ready stays unhealthy.
	pod.Status.Conditions[0].Message = "containers with unready status: [app]"
	if j := judge(pdb, pod, 0); !j.Allowed || j.Spend {
		t.Errorf("an unready pod under AlwaysAllow: %+v, want allowed without spending", j)
	}
}

func TestSelects(t *testing.T) {
	pdb := pdbFor("p", 1, 1, 0)
	if !selects(pdb, webPod("w", true)) {
		t.Error("matching labels not selected")
	}
	other := webPod("w", true)
	other.Namespace = "elsewhere"
	if selects(pdb, other) {
		t.Error("a pod of another namespace selected")
	}
	pdb.Spec.Selector = nil
	if selects(pdb, webPod("w", true)) {
		t.Error("a nil selector selected a pod")
	}
	pdb.Spec.Selector = &metav1.LabelSelector{}
	if !selects(pdb, webPod("w", true)) {
		t.Error("an empty selector did not select every pod")
	}
}

type pdbWorld struct {
	clk    *clocktesting.FakeClock
	cs     *fake.Clientset
	pdbs   []*policyv1.PodDisruptionBudget
	pods   map[types.UID]*v1.Pod
	gate   *DisruptionBudgets
	guard  *Guard
	inner  *fakeKiller
	rec    *recorder
	metric *Metrics
}

// oneSpentOnA is a world whose PDB allows one disruption, spent by a
// kill of pod a; pod b is Ready under the same PDB.
func oneSpentOnA(t *testing.T) (w *pdbWorld, a, b *v1.Pod) {
	t.Helper()
	w = newPDBWorld(pdbFor("web", 1, 3, 2))
	a, b = webPod("a", true), webPod("b", true)
	if err := w.kill(a); err != nil {
		t.Fatalf("first kill: %v", err)
	}
	return w, a, b
}

func newPDBWorld(pdbs ...*policyv1.PodDisruptionBudget) *pdbWorld {
	w := &pdbWorld{clk: clocktesting.NewFakeClock(epoch), cs: fake.NewClientset(), pdbs: pdbs, pods: map[types.UID]*v1.Pod{},
		inner: &fakeKiller{}, rec: &recorder{}, metric: NewMetrics(prometheus.NewRegistry())}
	w.gate = &DisruptionBudgets{
		PDBs:   func(string) []*policyv1.PodDisruptionBudget { return w.pdbs },
		Ledger: &Ledger{Leases: fromclientset.New(w.cs).CoordinationV1(), Namespace: "probed", Node: "node-a", Clock: w.clk},
		Pod:    func(uid types.UID) *v1.Pod { return w.pods[uid] },
		Clock:  w.clk,
	}
	w.guard = &Guard{Inner: w.inner, Disruptions: w.gate, Recorder: w.rec, Metrics: w.metric, Clock: w.clk}
	return w
}

func (w *pdbWorld) kill(p *v1.Pod) error {
	w.pods[p.UID] = p
	return w.guard.Kill(context.Background(), p, &v1.Container{Name: "app"}, "containerd://"+p.Name, probespec.Liveness, &v1.Probe{})
}

// A budget of one: the first kill spends it, the second is deferred (a
// Warning event naming the PDB, the metric, Reprobe) until the first pod
// is Ready again after its restart; then the disruption comes back.
func TestPDBGateRollingRestart(t *testing.T) {
	w, a, b := oneSpentOnA(t)
	deferred(t, w.kill(b), DeferPDB, true)
	deferred(t, w.kill(b), DeferPDB, true)
	evs := w.rec.byReason(ReasonDisruptionBudget)
	if len(evs) != 1 || evs[0].pod != "b" || evs[0].eventType != v1.EventTypeWarning ||
		!strings.Contains(evs[0].message, "PodDisruptionBudget ns/web allows no disruption now") ||
		!strings.HasSuffix(evs[0].message, "restart of container app after its liveness probe failure deferred") {
		t.Fatalf("events = %+v", evs)
	}
	if got := testutil.ToFloat64(w.metric.deferred.WithLabelValues(DeferPDB)); got != 1 {
		t.Errorf("deferred{pdb} = %v; want 1", got)
	}
	// a is restarted but not Ready yet: its disruption still counts.
	restarted := webPod("a", false)
	restarted.Status.ContainerStatuses[0].RestartCount = 1
	w.pods[a.UID] = restarted
	w.gate.releaseRecovered(context.Background())
	deferred(t, w.kill(b), DeferPDB, true)
	// a is Ready again: b goes.
	ready := webPod("a", true)
	ready.Status.ContainerStatuses[0].RestartCount = 1
	w.pods[a.UID] = ready
	w.gate.releaseRecovered(context.Background())
	if err := w.kill(b); err != nil {
		t.Fatalf("kill after a is Ready again: %v", err)
	}
	if got := strings.Join(w.inner.kills, ","); got != "a/app,b/app" {
		t.Errorf("kills = %s", got)
	}
}

// A retried kill of a pod already recorded spends nothing more; a record
// ends by itself after the Ledger's HoldFor (a node that went away).
func TestPDBLedgerRetryAndExpiry(t *testing.T) {
	w, a, b := oneSpentOnA(t)
	if err := w.kill(a); err != nil {
		t.Fatalf("retry of a recorded kill: %v", err)
	}
	deferred(t, w.kill(b), DeferPDB, true)
	w.clk.Step(DefaultHoldFor)
	if err := w.kill(b); err != nil {
		t.Fatalf("after the record's hold ran out: %v", err)
	}
}

// Several PDBs: all must allow, and one that refuses spends nothing under
// the others.
func TestPDBGateAllOrNothing(t *testing.T) {
	w := newPDBWorld(pdbFor("roomy", 5, 10, 5), pdbFor("tight", 0, 3, 3))
	deferred(t, w.kill(webPod("a", true)), DeferPDB, true)
	l, err := w.cs.CoordinationV1().Leases("probed").Get(context.Background(), "probed-pdb-uid-roomy", metav1.GetOptions{})
	if err == nil && len(decode(l)) != 0 {
		t.Errorf("the roomy PDB kept a record of a refused kill: %v", decode(l))
	}
	w.pdbs[1] = pdbFor("tight", 1, 4, 3)
	if err := w.kill(webPod("a", true)); err != nil {
		t.Fatalf("both allow: %v", err)
	}
}

// The API server cannot be asked: the kill goes to the node-local guards,
// with a Warning event and the metric.
func TestPDBGateUnreachable(t *testing.T) {
	w := newPDBWorld(pdbFor("web", 0, 3, 3))
	w.cs.PrependReactor("get", "leases", func(k8stesting.Action) (bool, runtime.Object, error) {
		return true, nil, errors.New("connection refused")
	})
	if err := w.kill(webPod("a", true)); err != nil {
		t.Fatalf("kill while the API server is away: %v", err)
	}
	if evs := w.rec.byReason(ReasonDisruptionBudgetUnchecked); len(evs) != 1 || !strings.Contains(evs[0].message, "connection refused") {
		t.Errorf("events = %+v", evs)
	}
	if got := testutil.ToFloat64(w.metric.unchecked); got != 1 {
		t.Errorf("unchecked = %v; want 1", got)
	}
}

// --pdb-restart-max-deferral: a kill refused that long goes ahead, saying
// so; 0 keeps it deferred.
func TestPDBGateMaxDeferral(t *testing.T) {
	w := newPDBWorld(pdbFor("web", 0, 3, 3))
	a := webPod("a", true)
	deferred(t, w.kill(a), DeferPDB, true)
	w.clk.Step(24 * time.Hour)
	deferred(t, w.kill(a), DeferPDB, true)
	w.gate.MaxDeferral = time.Hour
	w.gate.refusedSince = nil
	deferred(t, w.kill(a), DeferPDB, true)
	w.clk.Step(time.Hour)
	if err := w.kill(a); err != nil {
		t.Fatalf("after --pdb-restart-max-deferral: %v", err)
	}
	if evs := w.rec.byReason(ReasonDisruptionBudgetUnchecked); len(evs) != 1 || !strings.Contains(evs[0].message, "goes ahead after 1h0m0s") {
		t.Errorf("events = %+v", evs)
	}
}

// Pods no PDB selects, and the gate not configured, are killed as before.
func TestPDBGateNoPDB(t *testing.T) {
	w := newPDBWorld()
	if err := w.kill(webPod("a", true)); err != nil {
		t.Fatal(err)
	}
	if n := len(w.cs.Actions()); n != 0 {
		t.Errorf("%d API calls for a pod no PDB selects; want 0", n)
	}
}

// The gate forgets what it kept about pods that are gone: a spent
// disruption is given back, a refusal's start forgotten.
func TestPDBGateForgetsGonePods(t *testing.T) {
	w, a, b := oneSpentOnA(t)
	deferred(t, w.kill(b), DeferPDB, true)
	delete(w.pods, a.UID)
	delete(w.pods, b.UID)
	w.gate.releaseRecovered(context.Background())
	if len(w.gate.spent) != 0 || len(w.gate.refusedSince) != 0 {
		t.Errorf("kept after the pods went: spent %v, refusedSince %v", w.gate.spent, w.gate.refusedSince)
	}
	l, err := w.cs.CoordinationV1().Leases("probed").Get(context.Background(), "probed-pdb-uid-web", metav1.GetOptions{})
	if err != nil || len(decode(l)) != 0 {
		t.Errorf("the Lease still holds records after the pod went: %v %v", err, l)
	}
}

// A pod killed again before the disruption of its last restart was given
// back (its new container failed liveness within the release period, or
// probed restarted and does not know the record) goes under that record,
// which must then last until the pod is Ready again after this restart.
// Before, the release loop kept the first restart's count and gave the
// record back at once, while the pod still showed Ready from before the
// second kill (its stop takes the grace period): a second pod went while
// the first was down.
func TestPDBGateSecondKillKeepsItsRecord(t *testing.T) {
	w, a, b := oneSpentOnA(t)
	// a's restarted container is Ready; before the release loop runs, it
	// fails liveness and is killed again.
	again := webPod("a", true)
	again.Status.ContainerStatuses[0].RestartCount = 1
	if err := w.kill(again); err != nil {
		t.Fatalf("second kill under the pod's own record: %v", err)
	}
	// The informer still shows a Ready with one restart: the second is in flight.
	w.gate.releaseRecovered(context.Background())
	deferred(t, w.kill(b), DeferPDB, true)
	// a is Ready after its second restart: its disruption comes back.
	ready := webPod("a", true)
	ready.Status.ContainerStatuses[0].RestartCount = 2
	w.pods[a.UID] = ready
	w.gate.releaseRecovered(context.Background())
	if err := w.kill(b); err != nil {
		t.Fatalf("kill after a is Ready again: %v", err)
	}
}

// After a restart of probed the gate no longer knows the records its node
// wrote; a pod killed again under one of them gives it back once Ready,
// rather than holding the budget until the record's HoldFor runs out.
func TestPDBGateRecordFromBeforeARestart(t *testing.T) {
	w, a, b := oneSpentOnA(t)
	w.gate.spent = nil // probed restarted
	again := webPod("a", true)
	again.Status.ContainerStatuses[0].RestartCount = 1
	if err := w.kill(again); err != nil {
		t.Fatal(err)
	}
	ready := webPod("a", true)
	ready.Status.ContainerStatuses[0].RestartCount = 2
	w.pods[a.UID] = ready
	w.gate.releaseRecovered(context.Background())
	if err := w.kill(b); err != nil {
		t.Fatalf("kill after a is Ready again: %v", err)
	}
}
