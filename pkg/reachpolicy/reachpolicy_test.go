package reachpolicy

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"go.uber.org/goleak"
	admissionv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/record"
	clocktesting "k8s.io/utils/clock/testing"
)

func policy(fp admissionv1.FailurePolicyType) *admissionv1.ValidatingAdmissionPolicy {
	return &admissionv1.ValidatingAdmissionPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: DefaultPolicy},
		Spec:       admissionv1.ValidatingAdmissionPolicySpec{FailurePolicy: &fp},
	}
}

func binding(name string, mutate func(*admissionv1.ValidatingAdmissionPolicyBindingSpec)) *admissionv1.ValidatingAdmissionPolicyBinding {
	b := &admissionv1.ValidatingAdmissionPolicyBinding{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: admissionv1.ValidatingAdmissionPolicyBindingSpec{
			PolicyName: DefaultPolicy, ValidationActions: []admissionv1.ValidationAction{admissionv1.Deny},
		},
	}
	if mutate != nil {
		mutate(&b.Spec)
	}
	return b
}

// What counts as in force: the policy, failing closed, with an unscoped
// binding that denies.
func TestInForce(t *testing.T) {
	for _, tc := range []struct {
		name    string
		objects []any
		why     string // "" in force
	}{
		{"policy and binding", []any{policy(admissionv1.Fail), binding("any-name", nil)}, ""},
		{"no policy", []any{binding("b", nil)}, "no such ValidatingAdmissionPolicy"},
		{"failing open", []any{policy(admissionv1.Ignore), binding("b", nil)}, "failurePolicy is Ignore"},
		{"no binding", []any{policy(admissionv1.Fail)}, "no binding denies"},
		{"a binding of another policy", []any{policy(admissionv1.Fail), binding("b", func(s *admissionv1.ValidatingAdmissionPolicyBindingSpec) { s.PolicyName = "other" })}, "no binding denies"},
		{"a binding that only warns", []any{policy(admissionv1.Fail), binding("b", func(s *admissionv1.ValidatingAdmissionPolicyBindingSpec) {
			s.ValidationActions = []admissionv1.ValidationAction{admissionv1.Warn, admissionv1.Audit}
		})}, "no binding denies"},
		{"a binding scoped to some namespaces", []any{policy(admissionv1.Fail), binding("b", func(s *admissionv1.ValidatingAdmissionPolicyBindingSpec) {
			s.MatchResources = &admissionv1.MatchResources{NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"team": "a"}}}
		})}, "no binding denies"},
		{"a binding with empty match resources", []any{policy(admissionv1.Fail), binding("b", func(s *admissionv1.ValidatingAdmissionPolicyBindingSpec) {
			s.MatchResources = &admissionv1.MatchResources{NamespaceSelector: &metav1.LabelSelector{}, ObjectSelector: &metav1.LabelSelector{}}
		})}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			client := fake.NewClientset()
			for _, o := range tc.objects {
				var err error
				switch o := o.(type) {
				case *admissionv1.ValidatingAdmissionPolicy:
					_, err = client.AdmissionregistrationV1().ValidatingAdmissionPolicies().Create(context.Background(), o, metav1.CreateOptions{})
				case *admissionv1.ValidatingAdmissionPolicyBinding:
					_, err = client.AdmissionregistrationV1().ValidatingAdmissionPolicyBindings().Create(context.Background(), o, metav1.CreateOptions{})
				}
				if err != nil {
					t.Fatal(err)
				}
			}
			c, err := New(Options{Client: client, Policy: DefaultPolicy})
			if err != nil {
				t.Fatal(err)
			}
			why, err := c.outOfForce(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			if (tc.why == "") != (why == "") || !strings.Contains(why, tc.why) {
				t.Errorf("outOfForce = %q, want %q", why, tc.why)
			}
		})
	}
}

// The checker reports nothing before its first read, says at start that
// the policy is missing, notices its return and its deletion within one
// interval, and reports each change once.
func TestCheckerReportsChanges(t *testing.T) {
	defer goleak.VerifyNone(t)
	client := fake.NewClientset()
	reg := prometheus.NewRegistry()
	rec := record.NewFakeRecorder(10)
	clk := clocktesting.NewFakeClock(time.Unix(1000, 0))
	c, err := New(Options{Client: client, Policy: DefaultPolicy, Node: "n1", Recorder: rec, Registry: reg, Clock: clk, Interval: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	if n := testutil.CollectAndCount(reg, "probed_probe_reach_policy_in_force"); n != 0 {
		t.Fatalf("%d series before the first check; want none", n)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); c.Run(ctx) }()
	defer func() { cancel(); <-done }()

	gauge := func() float64 {
		return testutil.ToFloat64(c)
	}
	event := func(want string) {
		t.Helper()
		select {
		case e := <-rec.Events:
			if !strings.Contains(e, want) {
				t.Errorf("event %q, want %q", e, want)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("no event %q", want)
		}
	}
	event("Warning ProbeReachPolicyMissing admission policy probed-probe-reach is not in force (no such ValidatingAdmissionPolicy): a user who may patch a pod")
	if g := gauge(); g != 0 {
		t.Errorf("gauge %v with no policy, want 0", g)
	}

	api := client.AdmissionregistrationV1()
	if _, err := api.ValidatingAdmissionPolicies().Create(ctx, policy(admissionv1.Fail), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := api.ValidatingAdmissionPolicyBindings().Create(ctx, binding("b", nil), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitTicker(t, clk)
	clk.Step(time.Minute)
	event("Normal ProbeReachPolicyInForce")
	if g := gauge(); g != 1 {
		t.Errorf("gauge %v with the policy, want 1", g)
	}

	// Unchanged: no event.
	waitTicker(t, clk)
	clk.Step(time.Minute)
	if err := api.ValidatingAdmissionPolicyBindings().Delete(ctx, "b", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	waitTicker(t, clk)
	clk.Step(time.Minute)
	event("Warning ProbeReachPolicyMissing admission policy probed-probe-reach is not in force (no binding denies with it in every namespace)")
	if g := gauge(); g != 0 {
		t.Errorf("gauge %v after the binding was deleted, want 0", g)
	}
	select {
	case e := <-rec.Events:
		t.Errorf("unexpected event %q", e)
	default:
	}
}

// waitTicker waits until the checker is waiting on its ticker.
func waitTicker(t *testing.T, clk *clocktesting.FakeClock) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !clk.HasWaiters() {
		if time.Now().After(deadline) {
			t.Fatal("the checker never waited")
		}
		time.Sleep(time.Millisecond)
	}
}
