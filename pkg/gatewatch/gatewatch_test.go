package gatewatch

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	clocktesting "k8s.io/utils/clock/testing"
)

var t0 = time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)

type pods []*v1.Pod

func (p pods) List(labels.Selector) ([]*v1.Pod, error) { return p, nil }

type failing struct{}

func (failing) List(labels.Selector) ([]*v1.Pod, error) { return nil, errors.New("boom") }

// gated is a pod with the gate on node, scheduled at t0.
func gated(ns, name, node string, conds ...v1.PodConditionType) *v1.Pod {
	p := &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, CreationTimestamp: metav1.NewTime(t0.Add(-time.Hour))},
		Spec:       v1.PodSpec{NodeName: node, ReadinessGates: []v1.PodReadinessGate{{ConditionType: "other"}, {ConditionType: Gate}}},
		Status: v1.PodStatus{Phase: v1.PodRunning, Conditions: []v1.PodCondition{
			{Type: v1.PodScheduled, Status: v1.ConditionTrue, LastTransitionTime: metav1.NewTime(t0)},
		}},
	}
	for _, c := range conds {
		p.Status.Conditions = append(p.Status.Conditions, v1.PodCondition{Type: c, Status: v1.ConditionFalse})
	}
	return p
}

func TestUnanswered(t *testing.T) {
	grace := 2 * time.Minute
	after := t0.Add(grace + time.Second)
	ungated := gated("a", "p", "n")
	ungated.Spec.ReadinessGates = ungated.Spec.ReadinessGates[:1]
	unbound := gated("a", "p", "")
	done := gated("a", "p", "n")
	done.Status.Phase = v1.PodSucceeded
	deleting := gated("a", "p", "n")
	deleting.DeletionTimestamp = &metav1.Time{Time: t0}
	unscheduled := gated("a", "p", "n")
	unscheduled.Status.Conditions = nil // bound, but no PodScheduled yet: from creation
	for _, tc := range []struct {
		name string
		pod  *v1.Pod
		now  time.Time
		want bool
	}{
		{"unanswered past grace", gated("a", "p", "n"), after, true},
		{"within grace", gated("a", "p", "n"), t0.Add(grace), false},
		{"answered", gated("a", "p", "n", Gate), after, false},
		{"a container condition", gated("a", "p", "n", "ready.probed.io/app"), after, false},
		{"not gated", ungated, after, false},
		{"not bound", unbound, after, false},
		{"finished", done, after, false},
		{"being deleted", deleting, after, false},
		{"counted from creation", unscheduled, t0.Add(-time.Hour).Add(grace + time.Second), true},
	} {
		if got := Unanswered(tc.pod, tc.now, grace); got != tc.want {
			t.Errorf("%s: %v, want %v", tc.name, got, tc.want)
		}
	}
}

func TestCollector(t *testing.T) {
	clk := clocktesting.NewFakeClock(t0)
	synced := false
	c := New(Options{
		Pods: pods{
			gated("a", "1", "n1"), gated("a", "2", "n1"), gated("b", "3", "n1"), gated("a", "4", "n2"),
			gated("a", "5", "n1", Gate),
		},
		Synced: func() bool { return synced },
		Clock:  clk,
		Grace:  time.Minute,
	})
	reg := prometheus.NewRegistry()
	reg.MustRegister(c)
	if n, err := testutil.GatherAndCount(reg); err != nil || n != 0 {
		t.Errorf("before sync: %d series (%v), want none", n, err)
	}
	synced = true
	if n, _ := testutil.GatherAndCount(reg); n != 0 {
		t.Errorf("within grace: %d series, want none", n)
	}
	clk.Step(2 * time.Minute)
	want := `
# HELP probed_webhook_pods_gate_unanswered ` + metricHelp + `
# TYPE probed_webhook_pods_gate_unanswered gauge
probed_webhook_pods_gate_unanswered{namespace="a",node="n1"} 2
probed_webhook_pods_gate_unanswered{namespace="a",node="n2"} 1
probed_webhook_pods_gate_unanswered{namespace="b",node="n1"} 1
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want)); err != nil {
		t.Error(err)
	}

	broken := New(Options{Pods: failing{}, Clock: clk})
	if n := testutil.CollectAndCount(broken); n != 0 {
		t.Errorf("a failing lister gave %d series", n)
	}
}

func TestStrip(t *testing.T) {
	p := gated("a", "p", "n", Gate)
	p.Labels = map[string]string{"x": "y"}
	p.Spec.Containers = []v1.Container{{Name: "c", Image: "i"}}
	p.Status.Conditions = append(p.Status.Conditions, v1.PodCondition{Type: v1.PodReady, Status: v1.ConditionFalse, Message: "long"})
	out, err := Strip(ProbedPods{})(p)
	if err != nil {
		t.Fatal(err)
	}
	s := out.(*v1.Pod)
	if len(s.Labels) != 0 || len(s.Spec.Containers) != 0 || len(s.Status.Conditions) != 2 {
		t.Errorf("kept too much: %+v", s)
	}
	clk := t0.Add(time.Hour)
	for _, pod := range []*v1.Pod{gated("a", "p", "n"), gated("a", "p", "n", "started.probed.io/c")} {
		stripped, _ := Strip(ProbedPods{})(pod)
		if Unanswered(stripped.(*v1.Pod), clk, time.Minute) != Unanswered(pod, clk, time.Minute) {
			t.Errorf("stripping changed the verdict on %+v", pod.Status.Conditions)
		}
	}
	if tomb, _ := Strip(ProbedPods{})("tombstone"); tomb != "tombstone" {
		t.Error("a non-pod was changed")
	}
}

// probedOn is a pod of probed's DaemonSet on node.
func probedOn(node string, phase v1.PodPhase, ready v1.ConditionStatus) *v1.Pod {
	return &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "probed-system", Name: "probed-" + node, Labels: map[string]string{"app.kubernetes.io/name": "probed", "pod-template-hash": "x"}},
		Spec:       v1.PodSpec{NodeName: node, Containers: []v1.Container{{Name: "probed", Image: "probed"}}},
		Status:     v1.PodStatus{Phase: phase, Conditions: []v1.PodCondition{{Type: v1.PodReady, Status: ready, Message: "m"}}},
	}
}

// Gated pods, answered or not, on a node where no probed pod runs Ready
// are counted by namespace and node; on a node where one does, none are.
// The gauge is read from a cache that went through Strip.
func TestGatedWithoutProbed(t *testing.T) {
	probed := ProbedPods{Namespace: "probed-system", Selector: labels.SelectorFromSet(labels.Set{"app.kubernetes.io/name": "probed"})}
	elsewhere := probedOn("n4", v1.PodRunning, v1.ConditionTrue)
	elsewhere.Namespace = "other" // not probed's namespace
	deleting := probedOn("n5", v1.PodRunning, v1.ConditionTrue)
	deleting.DeletionTimestamp = &metav1.Time{Time: t0}
	ungated := gated("a", "x", "n2")
	ungated.Spec.ReadinessGates = nil
	var cache pods
	for _, p := range []*v1.Pod{
		probedOn("n1", v1.PodRunning, v1.ConditionTrue),
		probedOn("n3", v1.PodRunning, v1.ConditionFalse),
		elsewhere, deleting,
		gated("a", "1", "n1"), gated("a", "2", "n2", Gate), gated("a", "3", "n2"), gated("b", "4", "n2"),
		gated("a", "5", "n3"), gated("a", "6", "n4"), gated("a", "7", "n5"), gated("a", "8", ""), ungated,
	} {
		s, err := Strip(probed)(p)
		if err != nil {
			t.Fatal(err)
		}
		cache = append(cache, s.(*v1.Pod))
	}
	c := New(Options{Pods: cache, Clock: clocktesting.NewFakeClock(t0), Grace: time.Hour, Probed: probed})
	want := `
# HELP probed_webhook_pods_gated_without_probed ` + withoutProbedHelp + `
# TYPE probed_webhook_pods_gated_without_probed gauge
probed_webhook_pods_gated_without_probed{namespace="a",node="n2"} 2
probed_webhook_pods_gated_without_probed{namespace="b",node="n2"} 1
probed_webhook_pods_gated_without_probed{namespace="a",node="n3"} 1
probed_webhook_pods_gated_without_probed{namespace="a",node="n4"} 1
probed_webhook_pods_gated_without_probed{namespace="a",node="n5"} 1
`
	if err := testutil.CollectAndCompare(c, strings.NewReader(want), WithoutProbedMetricName); err != nil {
		t.Error(err)
	}
	// Without probed's selector the gauge is not served.
	if n := testutil.CollectAndCount(New(Options{Pods: cache, Clock: clocktesting.NewFakeClock(t0), Grace: time.Hour}), WithoutProbedMetricName); n != 0 {
		t.Errorf("%d series without a selector", n)
	}
	// Of probed's pods, Strip keeps the labels and Ready, nothing else.
	s, _ := Strip(probed)(probedOn("n1", v1.PodRunning, v1.ConditionTrue))
	sp := s.(*v1.Pod)
	if len(sp.Labels) != 2 || len(sp.Spec.Containers) != 0 || len(sp.Status.Conditions) != 1 || sp.Status.Conditions[0].Message != "" {
		t.Errorf("stripped probed pod: %+v", sp)
	}
}
