// Package shadow compares probed's verdicts with the kubelet's in shadow mode
// (--dry-run --probe-source=spec): probed runs the pod spec's probes, the
// same ones the kubelet runs, and writes nothing. What it would have written
// (the status writer's desired state) is compared with what the kubelet did
// write, the pod's containerStatuses: ready for a readiness probe, started
// for a startup probe. A liveness probe's verdict shows in the kubelet's
// status only as a restart, whatever caused it, so it is compared on the
// dashboard (prober_probe_total of both) instead.
//
// The two probe at different moments and publish through different paths,
// so a difference counts only once it has lasted Grace: two periods of the
// probe and Slack more. Each one that does is counted once, logged when it
// starts to count and when the two agree again, and the ones ongoing are a
// gauge.
package shadow

import (
	"context"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	"github.com/probed-dev/probed/pkg/containerstatus"
	"github.com/probed-dev/probed/pkg/status"
)

// Defaults for Options.
const (
	DefaultInterval = 5 * time.Second
	DefaultSlack    = 10 * time.Second
)

// defaultPeriod is the API's default periodSeconds.
const defaultPeriod = 10 * time.Second

// Desired lists what probed would write for each pod (status.Writer).
type Desired interface {
	Desired() []status.DesiredPod
}

// Options configure a Comparer.
type Options struct {
	// Desired and Pods are required: probed's verdicts, and the pods as the
	// informer has them (the kubelet's status).
	Desired Desired
	Pods    status.PodGetter
	// Clock defaults to the real clock.
	Clock clock.WithTicker
	// Interval between comparisons; default DefaultInterval.
	Interval time.Duration
	// Slack is added to two probe periods to make Grace; default DefaultSlack.
	Slack time.Duration
	// Metrics may be nil.
	Metrics *Metrics
}

// key is one probe of one container of one pod.
type key struct {
	uid       types.UID
	container string
	probeType string
}

// episode is one ongoing difference.
type episode struct {
	since   time.Time
	counted bool
	pod     klog.ObjectRef
	probed  bool
	kubelet bool
}

// Comparer compares probed's verdicts with the kubelet's; Run it in shadow
// mode only, where both run the same probes.
type Comparer struct {
	opts Options
	open map[key]*episode
}

// New returns a Comparer with opts' defaults filled in.
func New(opts Options) *Comparer {
	if opts.Clock == nil {
		opts.Clock = clock.RealClock{}
	}
	if opts.Interval <= 0 {
		opts.Interval = DefaultInterval
	}
	if opts.Slack <= 0 {
		opts.Slack = DefaultSlack
	}
	return &Comparer{opts: opts, open: map[key]*episode{}}
}

// Run compares every Interval until ctx ends.
func (c *Comparer) Run(ctx context.Context) {
	klog.InfoS("Shadow mode: comparing probed's verdicts with the kubelet's", "interval", c.opts.Interval, "slack", c.opts.Slack)
	t := c.opts.Clock.NewTicker(c.opts.Interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C():
			c.Compare()
		}
	}
}

// Compare does one comparison of every pod probed holds a verdict for.
func (c *Comparer) Compare() {
	now := c.opts.Clock.Now()
	differ := map[key]bool{}
	for _, d := range c.opts.Desired.Desired() {
		pod, ok := c.opts.Pods.Pod(d.Key.UID)
		if !ok {
			continue
		}
		ref := klog.KRef(d.Key.Namespace, d.Key.Name)
		for _, cs := range d.State.Containers {
			st, spec := containerOf(pod, cs.Name)
			// Only a running container's verdicts are compared: before and
			// after, both say not ready, each in its own time.
			if st == nil || st.State.Running == nil || spec == nil {
				continue
			}
			if cs.HasReadiness {
				k := key{d.Key.UID, cs.Name, "Readiness"}
				c.see(now, k, ref, cs.Ready, st.Ready, spec.ReadinessProbe, differ)
			}
			if cs.HasStartup {
				k := key{d.Key.UID, cs.Name, "Startup"}
				c.see(now, k, ref, cs.Started, st.Started != nil && *st.Started, spec.StartupProbe, differ)
			}
		}
	}
	for k, e := range c.open {
		if differ[k] {
			continue
		}
		if e.counted {
			klog.InfoS("Shadow mode: probed and the kubelet agree again", "pod", e.pod, "podUID", k.uid,
				"container", k.container, "probeType", k.probeType, "after", now.Sub(e.since).Round(time.Second))
		}
		delete(c.open, k)
	}
	ongoing := map[string]int{}
	for k, e := range c.open {
		if e.counted {
			ongoing[k.probeType]++
		}
	}
	c.opts.Metrics.setOngoing(ongoing)
}

// see records one probe's two verdicts.
func (c *Comparer) see(now time.Time, k key, ref klog.ObjectRef, probed, kubelet bool, probe *v1.Probe, differ map[key]bool) {
	if probed == kubelet {
		return
	}
	differ[k] = true
	e := c.open[k]
	if e == nil {
		e = &episode{since: now, pod: ref}
		c.open[k] = e
	}
	e.probed, e.kubelet = probed, kubelet
	if e.counted || now.Sub(e.since) < c.grace(probe) {
		return
	}
	e.counted = true
	c.opts.Metrics.counted(k.probeType)
	klog.InfoS("Shadow mode: probed's verdict differs from the kubelet's", "pod", ref, "podUID", k.uid,
		"container", k.container, "probeType", k.probeType, "probed", verdict(k.probeType, probed),
		"kubelet", verdict(k.probeType, kubelet), "for", now.Sub(e.since).Round(time.Second))
}

// grace is how long a difference must last to count: two of the probe's
// periods (the two may probe up to one apart) and the slack.
func (c *Comparer) grace(p *v1.Probe) time.Duration {
	period := defaultPeriod
	if p != nil && p.PeriodSeconds > 0 {
		period = time.Duration(p.PeriodSeconds) * time.Second
	}
	return 2*period + c.opts.Slack
}

// verdict spells a readiness or startup verdict for the log.
func verdict(probeType string, ok bool) string {
	switch {
	case probeType == "Startup" && ok:
		return "started"
	case probeType == "Startup":
		return "not started"
	case ok:
		return "ready"
	}
	return "not ready"
}

// containerOf returns the kubelet's status and the spec of a container or a
// sidecar (a restartable init container) of pod.
func containerOf(pod *v1.Pod, name string) (*v1.ContainerStatus, *v1.Container) {
	var spec *v1.Container
	for _, list := range [][]v1.Container{pod.Spec.Containers, pod.Spec.InitContainers} {
		for i := range list {
			if list[i].Name == name {
				spec = &list[i]
			}
		}
	}
	return containerstatus.Find(pod, name), spec
}
