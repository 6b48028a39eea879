package status

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/probed-dev/probed/pkg/kubeclient/fromclientset"

	"go.uber.org/goleak"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
)

// The reach record is a condition of its own, applied by its own field
// manager: the conditions Writer applies, and others', stay, and it stays
// when they are applied. A failed write is retried.
func TestReachRecorder(t *testing.T) {
	t.Cleanup(func() { goleak.VerifyNone(t) })
	ctx := context.Background()
	pod := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "ns", UID: "u1"},
		Status: v1.PodStatus{Conditions: []v1.PodCondition{{Type: "example.com/gate", Status: v1.ConditionTrue}}}}
	client := fake.NewClientset(pod)
	fail := 1
	client.PrependReactor("patch", "pods", func(k8stesting.Action) (bool, runtime.Object, error) {
		if fail > 0 {
			fail--
			return true, nil, errors.New("API server unavailable")
		}
		return false, nil, nil
	})
	r := NewReachRecorder(fromclientset.New(client), false)
	runCtx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { defer close(done); r.Run(runCtx) }()
	t.Cleanup(func() { cancel(); <-done })
	key := PodKey{Namespace: "ns", Name: "p", UID: "u1"}
	get := func() *v1.Pod {
		p, err := client.CoreV1().Pods("ns").Get(ctx, "p", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	waitRecord := func(want string) {
		t.Helper()
		if err := wait.PollUntilContextTimeout(ctx, 10*time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) {
			got, ok := ReachRecord(get())
			return ok && got == want, nil
		}); err != nil {
			t.Fatalf("no record %q: %+v", want, get().Status.Conditions)
		}
	}

	r.Record(key, "v1,app/livenessProbe=aa", metav1.Time{})
	waitRecord("v1,app/livenessProbe=aa")
	// The Writer applies probed's conditions: the record stays.
	if err := applyStatus(ctx, fromclientset.New(client), applyConfiguration(key, []v1.PodCondition{
		{Type: PodReadyCondition, Status: v1.ConditionTrue, Reason: ReasonNoGatingProbes, LastTransitionTime: metav1.Now()},
	}), FieldManager); err != nil {
		t.Fatal(err)
	}
	r.Record(key, "v1,app/livenessProbe=bb", metav1.Time{})
	waitRecord("v1,app/livenessProbe=bb")
	conds := get().Status.Conditions
	for _, want := range []v1.PodConditionType{"example.com/gate", PodReadyCondition, ReachConditionType} {
		if findCondition(conds, want) == nil {
			t.Errorf("no %s condition among %+v", want, conds)
		}
	}
	if c := findCondition(conds, ReachConditionType); c.Reason != ReasonReachRecorded || c.LastTransitionTime.IsZero() {
		t.Errorf("record condition %+v", c)
	}
	if IsOwnedConditionType(ReachConditionType) {
		t.Error("the Writer must not own the reach condition: its apply would remove it")
	}
}
