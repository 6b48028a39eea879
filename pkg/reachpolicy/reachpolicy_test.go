package reachpolicy

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/probed-dev/probed/pkg/kubeclient/fromclientset"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"go.uber.org/goleak"
	admissionv1 "k8s.io/api/admissionregistration/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/record"
	clocktesting "k8s.io/utils/clock/testing"
)

// shipped is deploy/probe-reach.yaml's policy under name, altered by mutate.
func shipped(t *testing.T, name string, mutate func(*admissionv1.ValidatingAdmissionPolicySpec)) *admissionv1.ValidatingAdmissionPolicy {
	t.Helper()
	spec, err := Shipped()
	if err != nil {
		t.Fatal(err)
	}
	if mutate != nil {
		mutate(&spec)
	}
	return &admissionv1.ValidatingAdmissionPolicy{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: spec}
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

// apiDefaults applies what the API server stores for fields the manifest
// leaves out.
func apiDefaults(s *admissionv1.ValidatingAdmissionPolicySpec) {
	eq, all := admissionv1.Equivalent, admissionv1.AllScopes
	s.MatchConstraints.MatchPolicy = &eq
	s.MatchConstraints.NamespaceSelector = &metav1.LabelSelector{}
	s.MatchConstraints.ObjectSelector = &metav1.LabelSelector{}
	for i := range s.MatchConstraints.ResourceRules {
		s.MatchConstraints.ResourceRules[i].Scope = &all
	}
}

// What counts as in force (issue 30, item 8): deploy/'s policy under the
// configured name, as the API server stores it, with an unscoped binding
// that denies. A policy with the name whose match rules, conditions,
// expressions or failure policy were changed does not count, nor does a
// binding that only warns.
func TestInForce(t *testing.T) {
	fp := func(f admissionv1.FailurePolicyType) func(*admissionv1.ValidatingAdmissionPolicySpec) {
		return func(s *admissionv1.ValidatingAdmissionPolicySpec) { s.FailurePolicy = &f }
	}
	for _, tc := range []struct {
		name    string
		objects []runtime.Object
		why     string // "" in force
	}{
		{"policy and binding", []runtime.Object{shipped(t, DefaultPolicy, nil), binding("any-name", nil)}, ""},
		{"as the API server stores it", []runtime.Object{shipped(t, DefaultPolicy, apiDefaults), binding("b", nil)}, ""},
		{"expressions folded otherwise", []runtime.Object{shipped(t, DefaultPolicy, func(s *admissionv1.ValidatingAdmissionPolicySpec) {
			s.MatchConditions[0].Expression = "\n  " + strings.ReplaceAll(s.MatchConditions[0].Expression, " ", "\n      ") + "\n"
		}), binding("b", nil)}, ""},
		{"no policy", []runtime.Object{binding("b", nil)}, "no such ValidatingAdmissionPolicy"},
		{"failing open", []runtime.Object{shipped(t, DefaultPolicy, fp(admissionv1.Ignore)), binding("b", nil)}, "failurePolicy is Ignore"},
		{"a validation that allows everything", []runtime.Object{shipped(t, DefaultPolicy, func(s *admissionv1.ValidatingAdmissionPolicySpec) {
			s.Validations[0].Expression = "true"
		}), binding("b", nil)}, "its validations differ from deploy/probe-reach.yaml's"},
		{"a check of another verb", []runtime.Object{shipped(t, DefaultPolicy, func(s *admissionv1.ValidatingAdmissionPolicySpec) {
			s.Validations[0].Expression = strings.Replace(s.Validations[0].Expression, "check('create')", "check('get')", 1)
		}), binding("b", nil)}, "its validations differ"},
		{"a match condition that matches nothing", []runtime.Object{shipped(t, DefaultPolicy, func(s *admissionv1.ValidatingAdmissionPolicySpec) {
			s.MatchConditions[0].Expression = "false"
		}), binding("b", nil)}, "its matchConditions differ"},
		{"pods/status no longer matched", []runtime.Object{shipped(t, DefaultPolicy, func(s *admissionv1.ValidatingAdmissionPolicySpec) {
			s.MatchConstraints.ResourceRules[0].Resources = []string{"pods"}
		}), binding("b", nil)}, "its matchConstraints differ"},
		{"kube-system left out", []runtime.Object{shipped(t, DefaultPolicy, func(s *admissionv1.ValidatingAdmissionPolicySpec) {
			s.MatchConstraints.NamespaceSelector = &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{
				{Key: "kubernetes.io/metadata.name", Operator: metav1.LabelSelectorOpNotIn, Values: []string{"kube-system"}}}}
		}), binding("b", nil)}, "its matchConstraints differ"},
		{"no binding", []runtime.Object{shipped(t, DefaultPolicy, nil)}, "no binding denies"},
		{"a binding of another policy", []runtime.Object{shipped(t, DefaultPolicy, nil), binding("b", func(s *admissionv1.ValidatingAdmissionPolicyBindingSpec) { s.PolicyName = "other" })}, "no binding denies"},
		{"a binding that only warns", []runtime.Object{shipped(t, DefaultPolicy, nil), binding("b", func(s *admissionv1.ValidatingAdmissionPolicyBindingSpec) {
			s.ValidationActions = []admissionv1.ValidationAction{admissionv1.Warn, admissionv1.Audit}
		})}, "no binding denies"},
		{"a binding scoped to some namespaces", []runtime.Object{shipped(t, DefaultPolicy, nil), binding("b", func(s *admissionv1.ValidatingAdmissionPolicyBindingSpec) {
			s.MatchResources = &admissionv1.MatchResources{NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"team": "a"}}}
		})}, "no binding denies"},
		{"a binding with empty match resources", []runtime.Object{shipped(t, DefaultPolicy, nil), binding("b", func(s *admissionv1.ValidatingAdmissionPolicyBindingSpec) {
			s.MatchResources = &admissionv1.MatchResources{NamespaceSelector: &metav1.LabelSelector{}, ObjectSelector: &metav1.LabelSelector{}}
		})}, ""},
		{"the shipped spec under another name only", []runtime.Object{shipped(t, "other", nil), binding("b", nil)}, "no such ValidatingAdmissionPolicy"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := New(Options{Client: fromclientset.New(fake.NewClientset()), Policy: DefaultPolicy})
			if err != nil {
				t.Fatal(err)
			}
			for _, o := range tc.objects {
				store := c.binding.GetStore()
				if _, ok := o.(*admissionv1.ValidatingAdmissionPolicy); ok {
					store = c.policy.GetStore()
				}
				if err := store.Add(o); err != nil {
					t.Fatal(err)
				}
			}
			if why := c.outOfForce(); (tc.why == "") != (why == "") || !strings.Contains(why, tc.why) {
				t.Errorf("outOfForce = %q, want %q", why, tc.why)
			}
		})
	}
}

// The chart names the policy <fullname>-probe-reach: the same spec under
// that name is in force for a probed told that name.
func TestInForceUnderTheChartsName(t *testing.T) {
	c, err := New(Options{Client: fromclientset.New(fake.NewClientset()), Policy: "probed-probe-reach-x"})
	if err != nil {
		t.Fatal(err)
	}
	_ = c.policy.GetStore().Add(shipped(t, "probed-probe-reach-x", nil))
	_ = c.binding.GetStore().Add(binding("b", func(s *admissionv1.ValidatingAdmissionPolicyBindingSpec) { s.PolicyName = "probed-probe-reach-x" }))
	if why := c.outOfForce(); why != "" {
		t.Errorf("outOfForce = %q", why)
	}
}

// checkerEnv runs a Checker on a fake API server.
type checkerEnv struct {
	t       *testing.T
	client  *fake.Clientset
	c       *Checker
	rec     *record.FakeRecorder
	reg     *prometheus.Registry
	changes atomic.Int32
}

func startChecker(t *testing.T, client *fake.Clientset, clk *clocktesting.FakeClock) *checkerEnv {
	t.Helper()
	e := &checkerEnv{t: t, client: client, rec: record.NewFakeRecorder(10), reg: prometheus.NewRegistry()}
	var err error
	e.c, err = New(Options{Client: fromclientset.New(client), Policy: DefaultPolicy, Node: "n1", Recorder: e.rec, Registry: e.reg, Clock: clk,
		OnChange: func() { e.changes.Add(1) }})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); e.c.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	return e
}

func (e *checkerEnv) event(want string) {
	e.t.Helper()
	select {
	case ev := <-e.rec.Events:
		if !strings.Contains(ev, want) {
			e.t.Errorf("event %q, want %q", ev, want)
		}
	case <-time.After(10 * time.Second):
		e.t.Fatalf("no event %q", want)
	}
}

func (e *checkerEnv) eventually(what string, cond func() bool) {
	e.t.Helper()
	if err := wait.PollUntilContextTimeout(context.Background(), 5*time.Millisecond, 10*time.Second, true,
		func(context.Context) (bool, error) { return cond(), nil }); err != nil {
		e.t.Fatalf("timed out waiting for %s", what)
	}
}

func (e *checkerEnv) inForce(want bool, why string) func() bool {
	return func() bool {
		got, gotWhy := e.c.InForce()
		return got == want && strings.Contains(gotWhy, why)
	}
}

// The checker reports nothing before its first read, says at start that
// the policy is missing, sees its return, a binding turned to Warn and an
// altered expression as soon as they happen, and reports each change of
// state once, to the manager too.
func TestCheckerReportsChanges(t *testing.T) {
	t.Cleanup(func() { goleak.VerifyNone(t) }) // after the checker's own cleanup
	client := fake.NewClientset()
	e := startChecker(t, client, clocktesting.NewFakeClock(time.Unix(1000, 0)))
	e.event("Warning ProbeReachPolicyMissing admission policy probed-probe-reach is not in force (no such ValidatingAdmissionPolicy): probed holds probe edits itself")
	e.eventually("the manager told", func() bool { return e.changes.Load() == 1 })
	if !e.c.Known() || testutil.ToFloat64(e.c) != 0 {
		t.Errorf("known %v, gauge %v; want known, 0", e.c.Known(), testutil.ToFloat64(e.c))
	}

	ctx := context.Background()
	api := client.AdmissionregistrationV1()
	if _, err := api.ValidatingAdmissionPolicies().Create(ctx, shipped(t, DefaultPolicy, nil), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := api.ValidatingAdmissionPolicyBindings().Create(ctx, binding("b", nil), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	e.event("Normal ProbeReachPolicyInForce")
	e.eventually("in force", e.inForce(true, ""))
	if g := testutil.ToFloat64(e.c); g != 1 {
		t.Errorf("gauge %v with the policy, want 1", g)
	}

	// Warn instead of Deny.
	if _, err := api.ValidatingAdmissionPolicyBindings().Update(ctx, binding("b", func(s *admissionv1.ValidatingAdmissionPolicyBindingSpec) {
		s.ValidationActions = []admissionv1.ValidationAction{admissionv1.Warn}
	}), metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	e.event("Warning ProbeReachPolicyMissing admission policy probed-probe-reach is not in force (no binding denies with it in every namespace)")
	// Deny again, but an expression changed: still out of force, no event.
	if _, err := api.ValidatingAdmissionPolicies().Update(ctx, shipped(t, DefaultPolicy, func(s *admissionv1.ValidatingAdmissionPolicySpec) {
		s.Validations[0].Expression = "true"
	}), metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := api.ValidatingAdmissionPolicyBindings().Update(ctx, binding("b", nil), metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	e.eventually("out of force for the expression", e.inForce(false, "its validations differ"))
	if _, err := api.ValidatingAdmissionPolicies().Update(ctx, shipped(t, DefaultPolicy, nil), metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	e.event("Normal ProbeReachPolicyInForce")
	if err := api.ValidatingAdmissionPolicies().Delete(ctx, DefaultPolicy, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	e.event("Warning ProbeReachPolicyMissing admission policy probed-probe-reach is not in force (no such ValidatingAdmissionPolicy)")
	if g := testutil.ToFloat64(e.c); g != 0 {
		t.Errorf("gauge %v after the policy was deleted, want 0", g)
	}
	e.eventually("five changes told (missing, back, warn, back, deleted)", func() bool { return e.changes.Load() == 5 })
	select {
	case ev := <-e.rec.Events:
		t.Errorf("unexpected event %q", ev)
	default:
	}
}

// A policy probed may not read, or an API without it, is known at once
// not to be in force; one that cannot be read for another reason, after
// ReadTimeout. Until then nothing is known and nothing is reported.
func TestCheckerCannotRead(t *testing.T) {
	t.Cleanup(func() { goleak.VerifyNone(t) })
	for _, tc := range []struct {
		name    string
		err     error
		timeout bool
	}{
		{"forbidden", apierrors.NewForbidden(admissionv1.Resource("validatingadmissionpolicies"), "", errors.New("RBAC")), false},
		{"no such API", apierrors.NewNotFound(admissionv1.Resource("validatingadmissionpolicies"), ""), false},
		{"failing", apierrors.NewInternalError(errors.New("etcd")), true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			client := fake.NewClientset()
			client.PrependReactor("list", "validatingadmissionpolicies", func(k8stesting.Action) (bool, runtime.Object, error) {
				return true, nil, tc.err
			})
			clk := clocktesting.NewFakeClock(time.Unix(1000, 0))
			e := startChecker(t, client, clk)
			if tc.timeout {
				time.Sleep(100 * time.Millisecond) // a failing list or two
				if e.c.Known() || testutil.CollectAndCount(e.reg, "probed_probe_reach_policy_in_force") != 0 {
					t.Fatal("known before ReadTimeout")
				}
				e.eventually("the timer", clk.HasWaiters)
				clk.Step(DefaultReadTimeout)
			}
			e.event("Warning ProbeReachPolicyMissing admission policy probed-probe-reach is not in force (it cannot be read: ")
			if ok, why := e.c.InForce(); ok || !e.c.Known() {
				t.Errorf("InForce = %v %q, known %v", ok, why, e.c.Known())
			}
		})
	}
}
