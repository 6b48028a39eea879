// Package podinformer builds the informer of the pods probed probes: those
// bound to its node, cached without what probed never reads.
package podinformer

import (
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/client-go/tools/cache"

	"github.com/probed-dev/probed/pkg/kubeclient"
)

// New returns the pod informer that lists and watches only the pods bound
// to nodeName (a field selector on spec.nodeName, as the kubelet's own pod
// watch), with no resync, and caches them through StripManagedFields.
func New(client kubeclient.Interface, nodeName string) (cache.SharedIndexInformer, error) {
	inf := kubeclient.NewInformer(client, client.CoreV1().Pods(metav1.NamespaceAll), &v1.Pod{}, func(lo *metav1.ListOptions) {
		lo.FieldSelector = fields.OneTermEqualSelector("spec.nodeName", nodeName).String()
	})
	if err := inf.SetTransform(StripManagedFields); err != nil {
		return nil, err
	}
	return inf, nil
}

// StripManagedFields is the pod informer's transform: probed never reads
// managedFields, which are often the larger part of a pod object (one entry
// per writer: the kubelet, controllers, probed itself), so the cache need
// not keep them. Writes are unaffected: an update without managedFields
// leaves the server's as they are.
func StripManagedFields(obj any) (any, error) {
	if p, ok := obj.(*v1.Pod); ok {
		p.ManagedFields = nil
	}
	return obj, nil
}

// NewFromKubelet returns the pod informer fed by the kubelet's Pods API
// through lw, caching as New does.
func NewFromKubelet(lw *KubeletListerWatcher) (cache.SharedIndexInformer, error) {
	inf := cache.NewSharedIndexInformerWithOptions(lw, &v1.Pod{},
		cache.SharedIndexInformerOptions{Indexers: cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc}})
	if err := inf.SetTransform(StripManagedFields); err != nil {
		return nil, err
	}
	return inf, nil
}
