// Package podinformer builds the informer of the pods probed probes: those
// bound to its node, cached without what probed never reads.
package podinformer

import (
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
)

// NewFactory returns the informer factory whose pod informer lists and
// watches only the pods bound to nodeName (a field selector on
// spec.nodeName, as the kubelet's own pod watch), with no resync, and
// caches them through StripManagedFields.
func NewFactory(client kubernetes.Interface, nodeName string) informers.SharedInformerFactory {
	return informers.NewSharedInformerFactoryWithOptions(client, 0,
		informers.WithTweakListOptions(func(lo *metav1.ListOptions) {
			lo.FieldSelector = fields.OneTermEqualSelector("spec.nodeName", nodeName).String()
		}),
		informers.WithTransform(StripManagedFields))
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
