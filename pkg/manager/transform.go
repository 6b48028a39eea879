package manager

import v1 "k8s.io/api/core/v1"

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
