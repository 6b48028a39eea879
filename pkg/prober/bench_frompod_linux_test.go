package prober

import (
	"context"
	"net"
	"net/http"
	"sync"
	"syscall"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/probed-dev/probed/pkg/hostpolicy"
	"github.com/probed-dev/probed/pkg/netns"
	"github.com/probed-dev/probed/pkg/netns/netnstest"
	"github.com/probed-dev/probed/pkg/probespec"
	"github.com/probed-dev/probed/pkg/results"
)

// Issue 36: CPU per probe sent from inside the pod (probed.io/from Pod:
// setns in, socket, setns back, on a goroutine of its own) against the
// same probe from the node, in the same run: the same servers on a
// loopback, in a namespace of their own or in the node's. cpu-µs/op is
// the process's user+system CPU per probe (servers included, the same on
// both sides).
//
//	go test -run '^$' -bench 'BenchmarkProbeFrom' ./pkg/prober/
func BenchmarkProbeFrom(b *testing.B) {
	ns := netnstest.New(b)
	for _, kind := range []string{"HTTP", "TCP", "GRPC"} {
		for _, from := range []string{"Node", "Pod"} {
			b.Run(kind+"/"+from, func(b *testing.B) {
				var l net.Listener
				if from == "Pod" {
					l = netnstest.Listen(b, ns, "127.0.0.1:0")
				} else {
					var err error
					if l, err = net.Listen("tcp", "127.0.0.1:0"); err != nil {
						b.Fatal(err)
					}
				}
				port := benchServe(b, kind, l)
				var spec *v1.Probe
				switch kind {
				case "HTTP":
					spec = httpSpec("/healthz", port)
				case "TCP":
					spec = &v1.Probe{TimeoutSeconds: 1, ProbeHandler: v1.ProbeHandler{TCPSocket: &v1.TCPSocketAction{Port: intstr.FromInt(port)}}}
				default:
					spec = &v1.Probe{TimeoutSeconds: 1, ProbeHandler: v1.ProbeHandler{GRPC: &v1.GRPCAction{Port: int32(port)}}}
				}
				// From the node: the default host policy, the pod's IP
				// its own; from the pod: the namespace.
				target := Target{PodIP: "127.0.0.1", PodIPs: []string{"127.0.0.1"}, PodIPsVerified: true}
				if from == "Pod" {
					target.PodIP, target.PodIPs = "10.244.0.7", []string{"10.244.0.7"}
					target.FromPod = true
					target.PodNetns = func(context.Context) (*netns.NS, error) { return ns, nil }
				}
				p := New(nil, Options{HostGuard: guardFor(hostpolicy.DenyNodeLocal)})
				benchProbeCPU(b, p, spec, target)
			})
		}
	}
}

// benchServe serves kind on l until the benchmark ends; it returns l's port.
func benchServe(b *testing.B, kind string, l net.Listener) int {
	var wg sync.WaitGroup
	wg.Add(1)
	switch kind {
	case "HTTP":
		s := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("ok")) })}
		go func() { defer wg.Done(); _ = s.Serve(l) }()
		b.Cleanup(func() { _ = s.Close(); wg.Wait() })
	case "TCP":
		go func() {
			defer wg.Done()
			for {
				c, err := l.Accept()
				if err != nil {
					return
				}
				_ = c.Close()
			}
		}()
		b.Cleanup(func() { _ = l.Close(); wg.Wait() })
	default:
		s := grpc.NewServer()
		healthpb.RegisterHealthServer(s, health.NewServer())
		go func() { defer wg.Done(); _ = s.Serve(l) }()
		b.Cleanup(func() { s.Stop(); wg.Wait() })
	}
	_, port := hostPort(b, l.Addr().String())
	return port
}

// benchProbeCPU is benchProbeWith that also reports the process's CPU
// time per probe.
func benchProbeCPU(b *testing.B, p *Prober, spec *v1.Probe, target Target) {
	b.Helper()
	target.Session = NewSession()
	defer target.Session.Close()
	ctx := context.Background()
	b.ReportAllocs()
	b.ResetTimer()
	before := cpuTime()
	for b.Loop() {
		res, out, err := p.Probe(ctx, probespec.Readiness, spec, target, nil)
		if res != results.Success || err != nil {
			b.Fatalf("Probe = %v, %q, %v", res, out, err)
		}
	}
	b.ReportMetric(float64((cpuTime()-before).Microseconds())/float64(b.N), "cpu-µs/op")
}

func cpuTime() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
