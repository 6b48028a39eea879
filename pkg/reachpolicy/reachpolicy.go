// Package reachpolicy tells whether the admission policy that makes probe
// edits need pods/exec is in force.
//
// probed runs the probes of a pod without probed.io/approved-reach as they
// are: it trusts the probe-reach ValidatingAdmissionPolicy to have refused
// every change of them by a user who may not create pods/exec, and to
// refuse any change of an approval (docs/security.md). Nothing in a pod
// says whether that policy was there when it was edited, so a Checker
// watches the premise instead. It promises: within one interval of the
// policy going out of force (deleted, not failing closed, or without an
// unscoped Deny binding), and at start, it says so in an error log line, a
// Warning event on the node, and probed_probe_reach_policy_in_force 0; once
// it is back, 1. It reports nothing until it has read the policy once.
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
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/record"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"
)

// DefaultPolicy is the policy's name in deploy/; the chart prefixes it.
const DefaultPolicy = "probed-probe-reach"

// Reasons of the node events.
const (
	ReasonMissing = "ProbeReachPolicyMissing"
	ReasonBack    = "ProbeReachPolicyInForce"
)

// Options configure a Checker.
type Options struct {
	Client kubernetes.Interface
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
	// Interval between checks; 0 is a minute.
	Interval time.Duration
}

// Checker checks the policy every Interval until its context ends.
type Checker struct {
	o Options

	mu       sync.Mutex
	known    bool
	inForce  bool
	gaugeDsc *prometheus.Desc
}

// New returns a Checker and registers its metric.
func New(o Options) (*Checker, error) {
	if o.Interval <= 0 {
		o.Interval = time.Minute
	}
	if o.Clock == nil {
		o.Clock = clock.RealClock{}
	}
	c := &Checker{o: o, gaugeDsc: prometheus.NewDesc("probed_probe_reach_policy_in_force",
		"1 while the ValidatingAdmissionPolicy that makes probe edits need pods/exec (--probe-reach-policy) is in force: it exists, fails closed, and an unscoped binding denies with it; 0 otherwise. Absent until it was read once.",
		[]string{"policy"}, nil)}
	if o.Registry != nil {
		if err := o.Registry.Register(c); err != nil {
			return nil, err
		}
	}
	return c, nil
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

// Run checks at once, then every Interval, until ctx ends.
func (c *Checker) Run(ctx context.Context) {
	t := c.o.Clock.NewTicker(c.o.Interval)
	defer t.Stop()
	for {
		c.Check(ctx)
		select {
		case <-ctx.Done():
			return
		case <-t.C():
		}
	}
}

// Check reads the policy and its bindings once and reports a change.
func (c *Checker) Check(ctx context.Context) {
	why, err := c.outOfForce(ctx)
	logger := klog.FromContext(ctx)
	if err != nil {
		// Unknown is not missing: keep what was known.
		logger.Error(err, "Could not read the probe-reach admission policy", "policy", c.o.Policy)
		return
	}
	c.mu.Lock()
	was, known := c.inForce, c.known
	c.inForce, c.known = why == "", true
	c.mu.Unlock()
	if known && was == (why == "") {
		return
	}
	node := &v1.ObjectReference{Kind: "Node", Name: c.o.Node, APIVersion: "v1"}
	if why == "" {
		logger.Info("The probe-reach admission policy is in force", "policy", c.o.Policy)
		if known && c.o.Recorder != nil {
			c.o.Recorder.Eventf(node, v1.EventTypeNormal, ReasonBack, "admission policy %s is in force again: probe edits need pods/exec", c.o.Policy)
		}
		return
	}
	consequence := "a user who may patch a pod without probed.io/approved-reach, but not exec into it, can change what its probes run, and probed runs it; restore the policy (deploy/probe-reach.yaml, or the chart) or run probed with --require-approved-reach"
	if c.o.RequireApproval {
		consequence = "probes with reach run only with probed.io/approved-reach (--require-approved-reach), but who may change that annotation now rests on RBAC alone; restore the policy (deploy/probe-reach.yaml, or the chart)"
	}
	logger.Error(nil, "The probe-reach admission policy is not in force", "policy", c.o.Policy, "why", why, "consequence", consequence)
	if c.o.Recorder != nil {
		c.o.Recorder.Eventf(node, v1.EventTypeWarning, ReasonMissing, "admission policy %s is not in force (%s): %s", c.o.Policy, why, consequence)
	}
}

// outOfForce says why the policy is not in force, or "" if it is.
func (c *Checker) outOfForce(ctx context.Context) (string, error) {
	api := c.o.Client.AdmissionregistrationV1()
	p, err := api.ValidatingAdmissionPolicies().Get(ctx, c.o.Policy, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return "no such ValidatingAdmissionPolicy", nil
	}
	if err != nil {
		return "", fmt.Errorf("reading ValidatingAdmissionPolicy %s: %w", c.o.Policy, err)
	}
	if fp := p.Spec.FailurePolicy; fp != nil && *fp != admissionv1.Fail {
		return fmt.Sprintf("its failurePolicy is %s, so an error in it admits the edit", *fp), nil
	}
	bindings, err := api.ValidatingAdmissionPolicyBindings().List(ctx, metav1.ListOptions{})
	if err != nil {
		return "", fmt.Errorf("listing ValidatingAdmissionPolicyBindings: %w", err)
	}
	for _, b := range bindings.Items {
		if b.Spec.PolicyName == c.o.Policy && slices.Contains(b.Spec.ValidationActions, admissionv1.Deny) && unscoped(b.Spec.MatchResources) {
			return "", nil
		}
	}
	return "no binding denies with it in every namespace", nil
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
