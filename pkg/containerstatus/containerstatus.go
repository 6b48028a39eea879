// Package containerstatus finds a container's status in a pod: the one rule
// the worker, the manager, the status writer and shadow mode share.
package containerstatus

import v1 "k8s.io/api/core/v1"

// Find returns the status of the container named name: the first with that
// name among the regular containers' statuses, then among the init
// containers' (a sidecar is an init container), or nil. Ephemeral
// containers are never probed, so their statuses are not searched.
func Find(pod *v1.Pod, name string) *v1.ContainerStatus {
	return find(pod, name, false)
}

// FindCreated is Find passing over a status without a container ID (a
// container the runtime has not created yet), as the kubelet's prober
// worker does before it probes.
func FindCreated(pod *v1.Pod, name string) *v1.ContainerStatus {
	return find(pod, name, true)
}

func find(pod *v1.Pod, name string, created bool) *v1.ContainerStatus {
	for _, list := range [][]v1.ContainerStatus{pod.Status.ContainerStatuses, pod.Status.InitContainerStatuses} {
		for i := range list {
			if list[i].Name == name && (!created || list[i].ContainerID != "") {
				return &list[i]
			}
		}
	}
	return nil
}
