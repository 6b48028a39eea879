// Package gatewatch finds pods that wait on probed's readiness gate with no
// probed to answer it. A pod with the probed.io/ready readiness gate becomes
// Ready only once probed writes that condition; on a node where probed does
// not run (its DaemonSet does not tolerate the node's taints, say), or for
// a pod that declares no probe for probed, nothing ever does, and the pod
// never becomes Ready, silently.
//
// A Collector promises: at each scrape, it counts, by namespace and node,
// the pods that have the gate, are bound to a node, are not finished or
// being deleted, and have carried no condition of probed's for longer than
// Grace since they were scheduled; and, given probed's own pods
// (Options.Probed), those of such gated pods, answered or not, whose node
// has no Running and Ready probed pod: there, nothing updates their
// readiness, whatever it was. It reads a pod cache only (no API call per
// scrape), and reports nothing until that cache has synced, rather than a
// false zero.
package gatewatch

import (
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"
)

// Gate is probed's readiness gate, and the aggregate condition it waits on.
const Gate v1.PodConditionType = "probed.io/ready"

// PodLister is what the Collector reads pods from: an informer's lister.
type PodLister interface {
	List(selector labels.Selector) ([]*v1.Pod, error)
}

// Options configure a Collector.
type Options struct {
	Pods PodLister
	// Synced reports whether Pods holds the whole cluster yet.
	Synced func() bool
	Clock  clock.PassiveClock
	// Grace is how long after scheduling a gated pod may go without a
	// condition from probed: long enough for probed to see the pod and
	// write, and for a probed pod to be replaced.
	Grace time.Duration
	// Probed are probed's DaemonSet pods; without a Selector the gauge of
	// gated pods without probed is not served.
	Probed ProbedPods
}

// ProbedPods are probed's DaemonSet pods: in Namespace, matching Selector.
type ProbedPods struct {
	Namespace string
	Selector  labels.Selector
}

// Match reports whether pod is one of probed's.
func (p ProbedPods) Match(pod *v1.Pod) bool {
	return p.Selector != nil && pod.Namespace == p.Namespace && p.Selector.Matches(labels.Set(pod.Labels))
}

// MetricName is the gauge a Collector serves.
const MetricName = "probed_webhook_pods_gate_unanswered"

const metricHelp = "Pods with the probed.io/ready readiness gate, bound to a node and not finished, that have had no condition from probed for longer than --gate-grace since they were scheduled: no probed answers on that node, or the pod declares no probe for probed. Such pods never become Ready."

// WithoutProbedMetricName is the gauge of gated pods on nodes where no
// probed pod is Running and Ready.
const WithoutProbedMetricName = "probed_webhook_pods_gated_without_probed"

const withoutProbedHelp = "Pods with the probed.io/ready readiness gate, bound to a node and not finished, on a node where no pod of probed's DaemonSet (--probed-namespace, --probed-selector) is Running and Ready. Nothing updates their readiness there: a Ready pod stays Ready whatever its health, a new one never becomes Ready."

// Collector is a prometheus.Collector (see the package comment).
type Collector struct {
	o             Options
	desc          *prometheus.Desc
	withoutProbed *prometheus.Desc
}

// New returns a Collector; register it to serve the gauges.
func New(o Options) *Collector {
	c := &Collector{o: o, desc: prometheus.NewDesc(MetricName, metricHelp, []string{"namespace", "node"}, nil)}
	if o.Probed.Selector != nil {
		c.withoutProbed = prometheus.NewDesc(WithoutProbedMetricName, withoutProbedHelp, []string{"namespace", "node"}, nil)
	}
	return c
}

// Describe implements prometheus.Collector.
func (c *Collector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.desc
	if c.withoutProbed != nil {
		ch <- c.withoutProbed
	}
}

// Collect implements prometheus.Collector.
func (c *Collector) Collect(ch chan<- prometheus.Metric) {
	if c.o.Synced != nil && !c.o.Synced() {
		return
	}
	pods, err := c.o.Pods.List(labels.Everything())
	if err != nil {
		klog.ErrorS(err, "Listing pods for the readiness gate gauge")
		return
	}
	now := c.o.Clock.Now()
	type key struct{ namespace, node string }
	counts, without := map[key]int{}, map[key]int{}
	served := map[string]bool{}
	for _, p := range pods {
		if c.o.Probed.Match(p) && serving(p) {
			served[p.Spec.NodeName] = true
		}
	}
	for _, p := range pods {
		if Unanswered(p, now, c.o.Grace) {
			counts[key{p.Namespace, p.Spec.NodeName}]++
		}
		if c.withoutProbed != nil && waiting(p) && !served[p.Spec.NodeName] {
			without[key{p.Namespace, p.Spec.NodeName}]++
		}
	}
	for k, n := range counts {
		ch <- prometheus.MustNewConstMetric(c.desc, prometheus.GaugeValue, float64(n), k.namespace, k.node)
	}
	for k, n := range without {
		ch <- prometheus.MustNewConstMetric(c.withoutProbed, prometheus.GaugeValue, float64(n), k.namespace, k.node)
	}
}

// serving reports whether one of probed's pods serves its node: Running,
// Ready, not being deleted.
func serving(p *v1.Pod) bool {
	if p.Spec.NodeName == "" || p.DeletionTimestamp != nil || p.Status.Phase != v1.PodRunning {
		return false
	}
	for _, c := range p.Status.Conditions {
		if c.Type == v1.PodReady {
			return c.Status == v1.ConditionTrue
		}
	}
	return false
}

// waiting reports whether pod depends on probed for its readiness: it has
// the gate, is bound and is not finished or being deleted.
func waiting(pod *v1.Pod) bool {
	return hasGate(pod) && pod.Spec.NodeName != "" && pod.DeletionTimestamp == nil &&
		pod.Status.Phase != v1.PodSucceeded && pod.Status.Phase != v1.PodFailed
}

// Unanswered reports whether pod waits on the gate, unanswered for longer
// than grace at now.
func Unanswered(pod *v1.Pod, now time.Time, grace time.Duration) bool {
	if !waiting(pod) {
		return false
	}
	since := pod.CreationTimestamp.Time
	for _, c := range pod.Status.Conditions {
		if isProbeds(c.Type) {
			return false
		}
		if c.Type == v1.PodScheduled && c.Status == v1.ConditionTrue && !c.LastTransitionTime.IsZero() {
			since = c.LastTransitionTime.Time
		}
	}
	return now.Sub(since) > grace
}

func hasGate(pod *v1.Pod) bool {
	for _, g := range pod.Spec.ReadinessGates {
		if g.ConditionType == Gate {
			return true
		}
	}
	return false
}

// isProbeds reports whether a condition is one probed writes: probed.io/ready,
// ready.probed.io/<c> or started.probed.io/<c>.
func isProbeds(t v1.PodConditionType) bool {
	return t == Gate || strings.Contains(string(t), ".probed.io/")
}

// Strip returns an informer transform that keeps of a pod only what
// Collect reads, so that caching every pod of the cluster costs little
// memory: of probed's own pods, also their labels and Ready condition.
func Strip(probed ProbedPods) func(any) (any, error) {
	return func(obj any) (any, error) { return strip(obj, probed) }
}

func strip(obj any, probed ProbedPods) (any, error) {
	pod, ok := obj.(*v1.Pod)
	if !ok {
		return obj, nil // a tombstone
	}
	out := &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Name: pod.Name, Namespace: pod.Namespace, UID: pod.UID, ResourceVersion: pod.ResourceVersion,
			CreationTimestamp: pod.CreationTimestamp, DeletionTimestamp: pod.DeletionTimestamp,
		},
		Spec:   v1.PodSpec{NodeName: pod.Spec.NodeName},
		Status: v1.PodStatus{Phase: pod.Status.Phase},
	}
	if probed.Match(pod) {
		out.Labels = pod.Labels
		for _, c := range pod.Status.Conditions {
			if c.Type == v1.PodReady {
				out.Status.Conditions = append(out.Status.Conditions, v1.PodCondition{Type: c.Type, Status: c.Status})
			}
		}
	}
	if hasGate(pod) {
		out.Spec.ReadinessGates = []v1.PodReadinessGate{{ConditionType: Gate}}
		for _, c := range pod.Status.Conditions {
			if c.Type == v1.PodScheduled || isProbeds(c.Type) {
				out.Status.Conditions = append(out.Status.Conditions, v1.PodCondition{Type: c.Type, Status: c.Status, LastTransitionTime: c.LastTransitionTime})
			}
		}
	}
	return out, nil
}
