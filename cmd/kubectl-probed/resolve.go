package main

import (
	"context"
	"fmt"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/cli-runtime/pkg/resource"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
)

// resolvePods returns the pods args and selector name, as kubectl resolves
// them (cli-runtime's resource builder: short names, TYPE/NAME, -l, -A): a
// pod itself, a workload's or a service's pods by its selector, and with
// no args every pod of the namespace. A bare name is a pod's. Each pod
// comes once.
func resolvePods(ctx context.Context, getter resource.RESTClientGetter, client kubernetes.Interface, ns string, args []string, selector string, all bool) ([]corev1.Pod, error) {
	named := make([]string, len(args))
	for i, a := range args {
		if !strings.Contains(a, "/") {
			a = "pod/" + a
		}
		named[i] = a
	}
	if len(named) == 0 {
		named = []string{"pods"}
	}
	infos, err := resource.NewBuilder(getter).
		WithScheme(scheme.Scheme, scheme.Scheme.PrioritizedVersionsAllGroups()...).
		NamespaceParam(ns).DefaultNamespace().AllNamespaces(all).
		LabelSelectorParam(selector).
		ResourceTypeOrNameArgs(true, named...).
		Flatten().
		Do().Infos()
	if err != nil {
		return nil, err
	}
	var pods []corev1.Pod
	seen := map[types.UID]bool{}
	add := func(p corev1.Pod) {
		if !seen[p.UID] {
			seen[p.UID] = true
			pods = append(pods, p)
		}
	}
	for _, info := range infos {
		if p, ok := info.Object.(*corev1.Pod); ok {
			add(*p)
			continue
		}
		sel, err := podSelector(info.Object)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", info.ObjectName(), err)
		}
		list, err := client.CoreV1().Pods(info.Namespace).List(ctx, metav1.ListOptions{LabelSelector: sel.String()})
		if err != nil {
			return nil, fmt.Errorf("listing the pods of %s: %w", info.ObjectName(), err)
		}
		for _, p := range list.Items {
			add(p)
		}
	}
	return pods, nil
}

// podSelector is the selector of the pods obj runs or serves.
func podSelector(obj runtime.Object) (labels.Selector, error) {
	var ls *metav1.LabelSelector
	switch o := obj.(type) {
	case *appsv1.Deployment:
		ls = o.Spec.Selector
	case *appsv1.StatefulSet:
		ls = o.Spec.Selector
	case *appsv1.DaemonSet:
		ls = o.Spec.Selector
	case *appsv1.ReplicaSet:
		ls = o.Spec.Selector
	case *batchv1.Job:
		ls = o.Spec.Selector
	case *corev1.ReplicationController:
		return nonEmpty(labels.SelectorFromSet(o.Spec.Selector))
	case *corev1.Service:
		return nonEmpty(labels.SelectorFromSet(o.Spec.Selector))
	default:
		return nil, fmt.Errorf("%T has no pod selector: name pods, a deployment, statefulset, daemonset, replicaset, job, replicationcontroller or service", obj)
	}
	if ls == nil {
		return nil, fmt.Errorf("no pod selector")
	}
	sel, err := metav1.LabelSelectorAsSelector(ls)
	if err != nil {
		return nil, err
	}
	return nonEmpty(sel)
}

// nonEmpty refuses a selector that selects every pod: a service without a
// selector selects none, and nothing else may have one.
func nonEmpty(sel labels.Selector) (labels.Selector, error) {
	if sel.Empty() {
		return nil, fmt.Errorf("selects no pods (its selector is empty)")
	}
	return sel, nil
}
