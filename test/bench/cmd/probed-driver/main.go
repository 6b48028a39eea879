// Command probed-driver runs probed's own code under the benchmark loads of
// benchkit: pkg/prober for network probes (net, rate) and pkg/worker for the
// scheduling figure (sched). Exec probes are probed-exec-driver's.
package main

import (
	"context"
	"fmt"
	"os"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/probed-dev/probed/pkg/hostpolicy"
	"github.com/probed-dev/probed/pkg/prober"
	"github.com/probed-dev/probed/pkg/probespec"
	"github.com/probed-dev/probed/pkg/results"
	"github.com/probed-dev/probed/test/bench/benchkit"
)

func main() {
	benchkit.Main(benchkit.Driver{
		Impl:  "probed",
		Maker: makeProbe,
		Sched: &sched{},
	})
}

// noEvents is the worker's event sink when nothing is recorded; success
// paths never call it.
type noEvents struct{}

func (noEvents) Event(string, string, string) {}

// netSpec is the probe a pod would declare for proto on port, with the API's
// defaults.
func netSpec(proto string, port int) (*v1.Probe, error) {
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
	return spec, nil
}

// The opt-in modes are chosen by environment, which the orchestrator passes
// through: PROBED_KEEPALIVE=1 (a probe's "probed.io/keepAlive": true),
// PROBED_TCP_CLOSE=rst (--tcp-probe-close=rst) and PROBED_HOST_POLICY
// (--probe-host-policy; default kubelet, which checks nothing, as the
// kubelet's code; deny-node-local, the daemon's default, gives each worker
// a Transport of its own).
var (
	keepAlive  = os.Getenv("PROBED_KEEPALIVE") == "1"
	tcpClose   = os.Getenv("PROBED_TCP_CLOSE")
	hostPolicy = os.Getenv("PROBED_HOST_POLICY")
)

// makeProbe calls (*prober.Prober).Probe the way a probed worker does: one
// shared Prober, the pod's IP as target, a readiness probe, the worker's
// Session.
func makeProbe(proto, host string, port int) (benchkit.Probe, error) {
	spec, err := netSpec(proto, port)
	if err != nil {
		return nil, err
	}
	mode, err := prober.ParseTCPCloseMode(tcpClose)
	if err != nil {
		return nil, err
	}
	var guard *hostpolicy.Guard
	if hostPolicy != "" {
		policy, err := hostpolicy.Parse(hostPolicy)
		if err != nil {
			return nil, err
		}
		guard = hostpolicy.NewGuard(policy, hostpolicy.GuardOptions{})
	}
	p := prober.New(nil, prober.Options{TCPClose: mode, HostGuard: guard})
	target := prober.Target{
		PodIP:       host,
		PodIPs:      []string{host},
		ContainerID: "containerd://0123456789abcdef",
		Ports:       []v1.ContainerPort{{Name: "http", ContainerPort: int32(port), Protocol: v1.ProtocolTCP}},
		KeepAlive:   keepAlive && proto != "tcp",
	}
	var sink prober.EventSink = noEvents{}
	// One Session per worker: concurrent probes stand for as many workers,
	// so each takes a Session of its own from a free list.
	sessions := make(chan *prober.Session, 4096)
	return func(ctx context.Context) error {
		t := target
		select {
		case t.Session = <-sessions:
		default:
			t.Session = prober.NewSession()
		}
		res, out, err := p.Probe(ctx, probespec.Readiness, spec, t, sink)
		select {
		case sessions <- t.Session:
		default:
			t.Session.Close()
		}
		if err != nil {
			return err
		}
		if res != results.Success {
			return fmt.Errorf("probe result %v: %s", res, out)
		}
		return nil
	}, nil
}
