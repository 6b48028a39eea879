package worker

import (
	"context"

	v1 "k8s.io/api/core/v1"

	"github.com/probed-dev/probed/pkg/cri"
)

// withOwner marks ctx with the pod container this worker serves, for the
// whole of its life: the runtime execs into and stops only that container
// (decorator.Verified), whatever container ID the pod's status names.
func (w *Worker) withOwner(ctx context.Context) context.Context {
	return cri.WithOwner(ctx, cri.Owner{
		PodNamespace: w.cfg.PodNamespace,
		PodName:      w.cfg.PodName,
		PodUID:       string(w.cfg.PodUID),
		StaticPodUID: w.cfg.StaticPodUID,
		Container:    w.cfg.Container.Name,
	})
}

// StaticPodUID is the UID of the static pod a mirror pod stands for (its
// kubernetes.io/config.mirror annotation), which the kubelet's containers
// carry instead of the mirror pod's own; "" for any other pod.
func StaticPodUID(pod *v1.Pod) string {
	if pod == nil {
		return ""
	}
	return pod.Annotations[v1.MirrorPodAnnotationKey]
}
