// Command kubelet-driver runs the kubelet's probing code under the loads of
// benchkit: the real k8s.io/kubernetes v1.37.2 pkg/probe packages behind a
// copy of the kubelet's prober call path (net, rate), and the kubelet's
// worker design (sched).
package main

import (
	"context"
	"fmt"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/probed-dev/probed/test/bench/benchkit"
)

func main() {
	benchkit.Main(benchkit.Driver{
		Impl:  "kubelet",
		Maker: makeProbe,
		Sched: &sched{},
	})
}

type noRecorder struct{}

func (noRecorder) Eventf(*v1.Pod, *v1.Container, string, string, string, ...interface{}) {}

// makeProbe calls the kubelet's prober.probe for a readiness probe of one
// container, as its worker does: the spec is the container's, the host is
// the pod's IP from the pod status.
func makeProbe(proto, host string, port int) (benchkit.Probe, error) {
	spec := &v1.Probe{TimeoutSeconds: 1, PeriodSeconds: 10, SuccessThreshold: 1, FailureThreshold: 3}
	switch proto {
	case "http":
		spec.HTTPGet = &v1.HTTPGetAction{Path: "/healthz", Port: intstr.FromInt32(int32(port)), Scheme: v1.URISchemeHTTP}
	case "tcp":
		spec.TCPSocket = &v1.TCPSocketAction{Port: intstr.FromInt32(int32(port))}
	case "grpc":
		spec.GRPC = &v1.GRPCAction{Port: int32(port)}
	default:
		return nil, fmt.Errorf("unknown protocol %q", proto)
	}
	pb := newProber(noRecorder{})
	pod := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "bench", Namespace: "bench", UID: "uid-bench"}}
	status := v1.PodStatus{Phase: v1.PodRunning, PodIP: host}
	container := v1.Container{
		Name:           "app",
		Ports:          []v1.ContainerPort{{Name: "http", ContainerPort: int32(port), Protocol: v1.ProtocolTCP}},
		ReadinessProbe: spec,
	}
	id := containerID{Type: "containerd", ID: "0123456789abcdef"}
	return func(ctx context.Context) error {
		res, err := pb.probe(ctx, readiness, pod, status, container, id)
		if err != nil {
			return err
		}
		if res != resultSuccess {
			return fmt.Errorf("probe result %d", res)
		}
		return nil
	}, nil
}
