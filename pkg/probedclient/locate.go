package probedclient

import (
	"context"
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/client-go/kubernetes"
)

// Defaults of deploy/daemonset.yaml. The selector leaves out a shadow's pods
// (deploy/shadow, the chart's shadow.enabled), which run beside probed's
// on the same nodes: --probed-selector app.kubernetes.io/component=shadow
// reads those.
const (
	DefaultNamespace = "probed-system"
	DefaultSelector  = "app.kubernetes.io/name=probed,app.kubernetes.io/component!=shadow"
	DefaultPort      = 9809
	// portName is the DaemonSet's name for the endpoints' port.
	portName = "metrics"
)

// Locator finds the probed pod that serves a node: a pod of probed's
// DaemonSet (by its labels) with that spec.nodeName.
type Locator struct {
	Client    kubernetes.Interface
	Namespace string
	Selector  string
}

// Pod returns the running probed pod on node; a Ready one if there is one,
// the newest if there are several (during a rollout).
func (l Locator) Pod(ctx context.Context, node string) (*corev1.Pod, error) {
	list, err := l.Client.CoreV1().Pods(l.Namespace).List(ctx, metav1.ListOptions{
		LabelSelector: l.Selector,
		FieldSelector: fields.OneTermEqualSelector("spec.nodeName", node).String(),
	})
	if err != nil {
		return nil, fmt.Errorf("listing probed's pods (namespace %s, selector %s) on node %s: %w%s", l.Namespace, l.Selector, node, err, RoleHint(err))
	}
	var running []*corev1.Pod
	var others []string
	for i := range list.Items {
		p := &list.Items[i]
		if p.Status.Phase == corev1.PodRunning && p.DeletionTimestamp == nil {
			running = append(running, p)
			continue
		}
		others = append(others, fmt.Sprintf("%s (%s)", p.Name, p.Status.Phase))
	}
	if len(running) == 0 {
		if len(others) > 0 {
			return nil, fmt.Errorf("no running probed pod on node %s: found %s", node, strings.Join(others, ", "))
		}
		return nil, fmt.Errorf("no probed pod on node %s (namespace %s, selector %s): is probed's DaemonSet installed and scheduled there?", node, l.Namespace, l.Selector)
	}
	slices.SortFunc(running, func(a, b *corev1.Pod) int {
		if ra, rb := ready(a), ready(b); ra != rb {
			if ra {
				return -1
			}
			return 1
		}
		return b.CreationTimestamp.Compare(a.CreationTimestamp.Time)
	})
	return running[0], nil
}

// Nodes returns the nodes that run a probed pod, sorted.
func (l Locator) Nodes(ctx context.Context) ([]string, error) {
	list, err := l.Client.CoreV1().Pods(l.Namespace).List(ctx, metav1.ListOptions{LabelSelector: l.Selector})
	if err != nil {
		return nil, fmt.Errorf("listing probed's pods (namespace %s, selector %s): %w%s", l.Namespace, l.Selector, err, RoleHint(err))
	}
	var nodes []string
	for _, p := range list.Items {
		if p.Spec.NodeName != "" && p.Status.Phase == corev1.PodRunning {
			nodes = append(nodes, p.Spec.NodeName)
		}
	}
	slices.Sort(nodes)
	return slices.Compact(nodes), nil
}

// RoleHint names what grants the access err says is missing, or "".
func RoleHint(err error) string {
	if apierrors.IsForbidden(err) {
		return " (a RoleBinding to the Role probed-plugin-user of deploy/kubectl-plugin.yaml, in probed's namespace, grants what kubectl probed needs there)"
	}
	return ""
}

func ready(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// EndpointsPort is the port of the pod's container port named "metrics",
// else DefaultPort.
func EndpointsPort(p *corev1.Pod) int {
	for _, c := range p.Spec.Containers {
		for _, port := range c.Ports {
			if port.Name == portName {
				return int(port.ContainerPort)
			}
		}
	}
	return DefaultPort
}
