// Package reachpolicy tells whether the admission policy that makes probe
// edits need pods/exec is in force.
//
// probed runs the probes of a pod without probed.io/approved-reach as they
// are, and trusts probed.io/approved-reach, only because the probe-reach
// ValidatingAdmissionPolicy refuses every change of them by a user who may
// not create pods/exec (docs/security.md). Nothing in a pod says whether
// that policy was there when it was edited, so a Checker watches the
// premise instead, and the manager holds probe edits itself whenever the
// policy is not known to be in force.
//
// In force means: a ValidatingAdmissionPolicy of the configured name
// whose spec is deploy/probe-reach.yaml's (match rules, conditions,
// expressions and failure policy alike), and a binding that denies with it
// in every namespace. A Checker watches both, so a deletion or change is
// seen at once. Within moments of the policy going out of force, and at
// start, it says so in an error log line, a Warning event on the node, and
// probed_probe_reach_policy_in_force 0; once it is back, 1.
package reachpolicy

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	admissionv1 "k8s.io/api/admissionregistration/v1"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	"github.com/probed-dev/probed/pkg/kubeclient"
)

// DefaultPolicy is the policy's name in deploy/; the chart prefixes it.
const DefaultPolicy = "probed-probe-reach"

// Reasons of the node events.
const (
	ReasonMissing = "ProbeReachPolicyMissing"
	ReasonBack    = "ProbeReachPolicyInForce"
)

// DefaultReadTimeout is how long a Checker waits for its first read of the
// policy before it takes the policy as not in force.
const DefaultReadTimeout = 30 * time.Second

// Options configure a Checker.
type Options struct {
	Client kubeclient.Interface
	// Policy is the ValidatingAdmissionPolicy's name.
	Policy string
	// Node is the node the events are about.
	Node string
	// RequireApproval is --require-approved-reach: probes with reach then
	// run only with an approval, and a missing policy leaves the approval
	// itself to RBAC; the messages say which.
	RequireApproval bool
	Recorder        record.EventRecorder
	Registry        prometheus.Registerer
	Clock           clock.WithTicker
	// ReadTimeout bounds the wait for the first read (not allowed, an API
	// without ValidatingAdmissionPolicy v1, an API server that fails):
	// after it the policy is known not to be in force until it is read.
	// 0 is DefaultReadTimeout.
	ReadTimeout time.Duration
	// OnChange, if set, is called after the policy's state changed (and
	// when it is first known), from the Checker's goroutine.
	OnChange func()
}

// Checker watches the policy and its bindings until its context ends.
type Checker struct {
	o       Options
	want    admissionv1.ValidatingAdmissionPolicySpec
	policy  cache.SharedIndexInformer
	binding cache.SharedIndexInformer
	changed chan struct{}

	mu       sync.Mutex
	known    bool
	inForce  bool
	why      string
	readErr  error // the last error reading either, until both are read
	gaugeDsc *prometheus.Desc
}

// New returns a Checker and registers its metric.
func New(o Options) (*Checker, error) {
	if o.ReadTimeout <= 0 {
		o.ReadTimeout = DefaultReadTimeout
	}
	if o.Clock == nil {
		o.Clock = clock.RealClock{}
	}
	want, err := Shipped()
	if err != nil {
		return nil, err
	}
	c := &Checker{o: o, want: want, changed: make(chan struct{}, 1),
		gaugeDsc: prometheus.NewDesc("probed_probe_reach_policy_in_force",
			"1 while the ValidatingAdmissionPolicy that makes probe edits need pods/exec (--probe-reach-policy) is in force: its spec is deploy/probe-reach.yaml's and an unscoped binding denies with it; 0 otherwise, and probed then holds probe edits itself. Absent until it was read once.",
			[]string{"policy"}, nil)}
	byName := func(lo *metav1.ListOptions) {
		lo.FieldSelector = fields.OneTermEqualSelector("metadata.name", o.Policy).String()
	}
	admission := o.Client.AdmissionregistrationV1()
	c.policy = kubeclient.NewInformer(o.Client, admission.ValidatingAdmissionPolicies(), &admissionv1.ValidatingAdmissionPolicy{}, byName)
	c.binding = kubeclient.NewInformer(o.Client, admission.ValidatingAdmissionPolicyBindings(), &admissionv1.ValidatingAdmissionPolicyBinding{}, func(*metav1.ListOptions) {})
	for _, inf := range []cache.SharedIndexInformer{c.policy, c.binding} {
		if _, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
			AddFunc:    func(any) { c.notify() },
			UpdateFunc: func(any, any) { c.notify() },
			DeleteFunc: func(any) { c.notify() },
		}); err != nil {
			return nil, err
		}
		if err := inf.SetWatchErrorHandlerWithContext(c.readFailed); err != nil {
			return nil, err
		}
	}
	if o.Registry != nil {
		if err := o.Registry.Register(c); err != nil {
			return nil, err
		}
	}
	return c, nil
}

func (c *Checker) notify() {
	select {
	case c.changed <- struct{}{}:
	default:
	}
}

// readFailed keeps a list or watch error, which decides the state while
// the policy has not been read, and logs it as client-go would.
func (c *Checker) readFailed(ctx context.Context, r *cache.Reflector, err error) {
	cache.DefaultWatchErrorHandler(ctx, r, err)
	c.mu.Lock()
	c.readErr = err
	c.mu.Unlock()
	c.notify()
}

// Describe implements prometheus.Collector.
func (c *Checker) Describe(ch chan<- *prometheus.Desc) { ch <- c.gaugeDsc }

// Collect implements prometheus.Collector.
func (c *Checker) Collect(ch chan<- prometheus.Metric) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.known {
		return
	}
	v := 0.0
	if c.inForce {
		v = 1
	}
	ch <- prometheus.MustNewConstMetric(c.gaugeDsc, prometheus.GaugeValue, v, c.o.Policy)
}

// Known reports whether the policy's state is known: it was read, or
// could not be read within ReadTimeout.
func (c *Checker) Known() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.known
}

// InForce reports whether the policy is known to be in force, and if not,
// why.
func (c *Checker) InForce() (bool, string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	switch {
	case !c.known:
		return false, "it has not been read yet"
	case !c.inForce:
		return false, c.why
	}
	return true, ""
}

// Run watches the policy and its bindings until ctx ends, and judges them
// at every change.
func (c *Checker) Run(ctx context.Context) {
	var wg sync.WaitGroup
	for _, inf := range []cache.SharedIndexInformer{c.policy, c.binding} {
		wg.Add(1)
		go func() { defer wg.Done(); inf.RunWithContext(ctx) }()
	}
	// An empty list brings no event: judge once both have synced.
	wg.Add(1)
	go func() {
		defer wg.Done()
		if cache.WaitForCacheSync(ctx.Done(), c.policy.HasSynced, c.binding.HasSynced) {
			c.notify()
		}
	}()
	defer wg.Wait()
	timeout := c.o.Clock.NewTimer(c.o.ReadTimeout)
	defer timeout.Stop()
	timedOut := false
	for {
		c.judge(ctx, timedOut)
		select {
		case <-ctx.Done():
			return
		case <-c.changed:
		case <-timeout.C():
			timedOut = true
		}
	}
}

// judge decides the policy's state from what the informers hold and
// reports a change.
func (c *Checker) judge(ctx context.Context, timedOut bool) {
	var why string
	c.mu.Lock()
	readErr := c.readErr
	c.mu.Unlock()
	switch {
	case c.policy.HasSynced() && c.binding.HasSynced():
		why = c.outOfForce()
	case readErr != nil && (timedOut || apierrors.IsNotFound(readErr) || apierrors.IsForbidden(readErr)):
		// Not allowed, or no ValidatingAdmissionPolicy v1 (before 1.30):
		// no reason to wait; anything else gets ReadTimeout to clear.
		why = fmt.Sprintf("it cannot be read: %v", readErr)
	case timedOut:
		why = fmt.Sprintf("it was not read within %v", c.o.ReadTimeout)
	default:
		return
	}
	c.mu.Lock()
	was, known := c.inForce, c.known
	c.inForce, c.known, c.why = why == "", true, why
	c.mu.Unlock()
	if known && was == (why == "") {
		return
	}
	c.report(ctx, known, was, why)
	if c.o.OnChange != nil {
		c.o.OnChange()
	}
}

// report logs, and records an event on the node for, a new state.
func (c *Checker) report(ctx context.Context, known, was bool, why string) {
	logger := klog.FromContext(ctx)
	node := &v1.ObjectReference{Kind: "Node", Name: c.o.Node, APIVersion: "v1"}
	if why == "" {
		logger.Info("The probe-reach admission policy is in force", "policy", c.o.Policy)
		if known && !was && c.o.Recorder != nil {
			c.o.Recorder.Eventf(node, v1.EventTypeNormal, ReasonBack, "admission policy %s is in force again: probe edits need pods/exec", c.o.Policy)
		}
		return
	}
	consequence := "probed holds probe edits itself: a probe whose command, or where it connects, is not what probed recorded when it first saw the pod (reach.probed.io) is not run (InvalidProbe), so even a user allowed to create pods/exec must recreate the pod to change it; restore the policy (deploy/probe-reach.yaml, or the chart)"
	if c.o.RequireApproval {
		consequence = "probed holds probe edits itself (reach.probed.io), and probes with reach run only with probed.io/approved-reach (--require-approved-reach), but who may change that annotation now rests on RBAC alone; restore the policy (deploy/probe-reach.yaml, or the chart)"
	}
	logger.Error(nil, "The probe-reach admission policy is not in force", "policy", c.o.Policy, "why", why, "consequence", consequence)
	if c.o.Recorder != nil && (!known || was) {
		c.o.Recorder.Eventf(node, v1.EventTypeWarning, ReasonMissing, "admission policy %s is not in force (%s): %s", c.o.Policy, why, consequence)
	}
}

// outOfForce says why the policy the informers hold is not in force, or ""
// if it is.
func (c *Checker) outOfForce() string {
	var p *admissionv1.ValidatingAdmissionPolicy
	for _, obj := range c.policy.GetStore().List() {
		if x, ok := obj.(*admissionv1.ValidatingAdmissionPolicy); ok && x.Name == c.o.Policy {
			p = x
		}
	}
	if p == nil {
		return "no such ValidatingAdmissionPolicy"
	}
	if fp := p.Spec.FailurePolicy; fp != nil && *fp != admissionv1.Fail {
		return fmt.Sprintf("its failurePolicy is %s, so an error in it admits the edit", *fp)
	}
	if why := specDiffers(p.Spec, c.want); why != "" {
		return why
	}
	for _, obj := range c.binding.GetStore().List() {
		b, ok := obj.(*admissionv1.ValidatingAdmissionPolicyBinding)
		if ok && b.Spec.PolicyName == c.o.Policy && slices.Contains(b.Spec.ValidationActions, admissionv1.Deny) && unscoped(b.Spec.MatchResources) {
			return ""
		}
	}
	return "no binding denies with it in every namespace"
}

// unscoped reports whether a binding's match resources narrow nothing.
func unscoped(m *admissionv1.MatchResources) bool {
	if m == nil {
		return true
	}
	empty := func(s *metav1.LabelSelector) bool {
		return s == nil || (len(s.MatchLabels) == 0 && len(s.MatchExpressions) == 0)
	}
	return empty(m.NamespaceSelector) && empty(m.ObjectSelector) && len(m.ResourceRules) == 0 && len(m.ExcludeResourceRules) == 0
}
