package prober

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/probed-dev/probed/pkg/hostpolicy"
	"github.com/probed-dev/probed/pkg/netns"
	"github.com/probed-dev/probed/pkg/netns/netnstest"
	"github.com/probed-dev/probed/pkg/probespec"
)

// podServers is a pod as a probe from inside sees it: a network namespace
// whose HTTP, TCP, h2c and gRPC servers listen only on its loopback.
type podServers struct {
	ns                   *netns.NS
	http, tcp, grpc, h2c int
	userAgents           chan string
}

func startPodServers(t *testing.T) *podServers {
	t.Helper()
	ns := netnstest.New(t)
	p := &podServers{ns: ns, userAgents: make(chan string, 100)}
	port := func(l net.Listener) int { _, n := hostPort(t, l.Addr().String()); return n }

	hl := netnstest.Listen(t, ns, "127.0.0.1:0")
	hs := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case p.userAgents <- r.UserAgent():
		default:
		}
		if r.URL.Path == "/fail" {
			http.Error(w, "not yet", http.StatusServiceUnavailable)
			return
		}
		_, _ = fmt.Fprint(w, "ok from inside")
	})}
	h2 := &http.Server{Handler: hs.Handler, Protocols: new(http.Protocols)}
	h2.Protocols.SetUnencryptedHTTP2(true)
	h2l := netnstest.Listen(t, ns, "127.0.0.1:0")
	tl := netnstest.Listen(t, ns, "127.0.0.1:0")
	gl := netnstest.Listen(t, ns, "127.0.0.1:0")
	gs := grpc.NewServer()
	healthpb.RegisterHealthServer(gs, health.NewServer())

	var wg sync.WaitGroup
	wg.Add(4)
	go func() { defer wg.Done(); _ = hs.Serve(hl) }()
	go func() { defer wg.Done(); _ = h2.Serve(h2l) }()
	go func() { defer wg.Done(); _ = gs.Serve(gl) }()
	go func() {
		defer wg.Done()
		for {
			c, err := tl.Accept()
			if err != nil {
				return
			}
			_ = c.Close()
		}
	}()
	t.Cleanup(func() {
		_ = hs.Close()
		_ = h2.Close()
		gs.Stop()
		_ = tl.Close()
		wg.Wait()
	})
	p.http, p.h2c, p.tcp, p.grpc = port(hl), port(h2l), port(tl), port(gl)
	return p
}

func (p *podServers) target(fromPod bool) Target {
	return Target{
		PodIP: "10.244.0.7", PodIPs: []string{"10.244.0.7"}, PodIPsVerified: true,
		FromPod:  fromPod,
		PodNetns: func(context.Context) (*netns.NS, error) { return p.ns, nil },
	}
}

// An app that listens only on the pod's loopback fails a probe from the
// node, as under the kubelet, and passes the same probe sent from inside
// the pod: HTTP, h2c, TCP and gRPC.
func TestFromPodReachesThePodsLoopback(t *testing.T) {
	pod := startPodServers(t)
	h2 := v1.HTTPProtocolHTTP2
	probes := map[string]*v1.Probe{
		"http":      {ProbeHandler: v1.ProbeHandler{HTTPGet: &v1.HTTPGetAction{Path: "/healthz", Port: intstr.FromInt(pod.http), Scheme: v1.URISchemeHTTP}}},
		"h2c":       {ProbeHandler: v1.ProbeHandler{HTTPGet: &v1.HTTPGetAction{Path: "/healthz", Port: intstr.FromInt(pod.h2c), Scheme: v1.URISchemeHTTP, Protocol: &h2}}},
		"tcp":       {ProbeHandler: v1.ProbeHandler{TCPSocket: &v1.TCPSocketAction{Port: intstr.FromInt(pod.tcp)}}},
		"grpc":      {ProbeHandler: v1.ProbeHandler{GRPC: &v1.GRPCAction{Port: int32(pod.grpc)}}},
		"localhost": {ProbeHandler: v1.ProbeHandler{TCPSocket: &v1.TCPSocketAction{Host: "localhost", Port: intstr.FromInt(pod.tcp)}}},
	}
	p := New(nil, Options{UserAgent: NewUserAgent("1.37"), HostGuard: hostpolicy.NewGuard(hostpolicy.DenyNodeLocal, hostpolicy.GuardOptions{})})
	for name, spec := range probes {
		spec.TimeoutSeconds = 1
		t.Run(name, func(t *testing.T) {
			res, out, err := p.runOnce(context.Background(), spec, pod.target(true))
			if err != nil || res != Success {
				t.Fatalf("from the pod: %s %q %v; want success", res, out, err)
			}
			// From the node, to the node's loopback: the host policy
			// refuses it; to the pod IP, nothing answers in this test.
			nodeTarget := pod.target(false)
			nodeTarget.PodIP, nodeTarget.PodIPs = "127.0.0.1", []string{"127.0.0.1"}
			res, _, err = New(nil, Options{}).runOnce(context.Background(), spec, nodeTarget)
			if res == Success {
				t.Skipf("something on the node answers on the same port: %v", err)
			}
		})
	}
	select {
	case ua := <-pod.userAgents:
		if ua != "kube-probe/1.37" {
			t.Errorf("User-Agent %q; want the kubelet's", ua)
		}
	default:
		t.Error("the HTTP server saw no probe")
	}

	fail := &v1.Probe{TimeoutSeconds: 1, ProbeHandler: v1.ProbeHandler{HTTPGet: &v1.HTTPGetAction{Path: "/fail", Port: intstr.FromInt(pod.http), Scheme: v1.URISchemeHTTP}}}
	res, out, err := p.runOnce(context.Background(), fail, pod.target(true))
	if res != Failure || err != nil || out != "HTTP probe failed with statuscode: 503" {
		t.Errorf("503 from inside: %s %q %v; want the kubelet's failure text", res, out, err)
	}
	closed := &v1.Probe{TimeoutSeconds: 1, ProbeHandler: v1.ProbeHandler{TCPSocket: &v1.TCPSocketAction{Port: intstr.FromInt(1)}}}
	res, out, err = p.runOnce(context.Background(), closed, pod.target(true))
	if want := "dial tcp 127.0.0.1:1: connect: connection refused"; res != Failure || err != nil || out != want {
		t.Errorf("closed port from inside: %s %q %v; want %q", res, out, err, want)
	}
}

// From inside the pod a probe reaches only the pod's own addresses, even
// where the annotation's validation was bypassed; a redirect elsewhere is
// not followed.
func TestFromPodReachesNothingElse(t *testing.T) {
	pod := startPodServers(t)
	p := New(nil, Options{})
	for _, host := range []string{"10.0.0.1", "169.254.169.254", "example.com", "::1%lo"} {
		spec := &v1.Probe{TimeoutSeconds: 1, ProbeHandler: v1.ProbeHandler{TCPSocket: &v1.TCPSocketAction{Host: host, Port: intstr.FromInt(pod.tcp)}}}
		res, _, err := p.runOnce(context.Background(), spec, pod.target(true))
		if res != Unknown || !hostpolicy.IsRefused(err) || !strings.Contains(err.Error(), "probed.io/from Pod") {
			t.Errorf("host %s: %s %v; want a refusal", host, res, err)
		}
	}
	// The pod's own IP is allowed (nothing listens on it in this test).
	spec := &v1.Probe{TimeoutSeconds: 1, ProbeHandler: v1.ProbeHandler{TCPSocket: &v1.TCPSocketAction{Host: "10.244.0.7", Port: intstr.FromInt(pod.tcp)}}}
	if _, _, err := p.runOnce(context.Background(), spec, pod.target(true)); hostpolicy.IsRefused(err) {
		t.Errorf("the pod's own IP refused: %v", err)
	}
}

// Without a way into pods' namespaces a probe from inside errors, never
// goes out from the node.
func TestFromPodWithoutNamespace(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = l.Close() }()
	_, port := hostPort(t, l.Addr().String())
	spec := &v1.Probe{TimeoutSeconds: 1, ProbeHandler: v1.ProbeHandler{TCPSocket: &v1.TCPSocketAction{Port: intstr.FromInt(port)}}}
	res, _, err := New(nil, Options{}).runOnce(context.Background(), spec, Target{PodIP: "127.0.0.1", FromPod: true})
	if res != Unknown || err == nil || !strings.Contains(err.Error(), "--pod-network-probes") {
		t.Errorf("%s %v; want an error naming the switch", res, err)
	}
	lookupErr := fmt.Errorf("the runtime runs this pod in a VM")
	res, _, err = New(nil, Options{}).runOnce(context.Background(), spec, Target{PodIP: "127.0.0.1", FromPod: true,
		PodNetns: func(context.Context) (*netns.NS, error) { return nil, lookupErr }})
	if res != Unknown || err != lookupErr {
		t.Errorf("%s %v; want the lookup's error", res, err)
	}
}

// A pod whose runtime has no network namespace on the node (Kata, gVisor)
// gets an InvalidProbe, tried once, and an errored result the worker
// discards: never a probe from elsewhere, never an Unhealthy.
func TestFromPodUnsupportedRuntimeIsInvalid(t *testing.T) {
	spec := &v1.Probe{TimeoutSeconds: 1, ProbeHandler: v1.ProbeHandler{TCPSocket: &v1.TCPSocketAction{Port: intstr.FromInt(80)}}}
	lookups := 0
	unsupported := fmt.Errorf("probed.io/from Pod: the pod runs under runtime %q: %w", "io.containerd.kata.v2", ErrPodNetworkUnsupported)
	ev := &recordingSink{}
	_, _, err := New(nil, Options{}).Probe(context.Background(), probespec.Liveness, spec, Target{PodIP: "127.0.0.1", FromPod: true,
		PodNetns: func(context.Context) (*netns.NS, error) { lookups++; return nil, unsupported }}, ev)
	if !errors.Is(err, ErrPodNetworkUnsupported) {
		t.Fatalf("err %v; want ErrPodNetworkUnsupported, so the worker discards the result", err)
	}
	if lookups != 1 {
		t.Errorf("looked the namespace up %d times; an invalid probe is not retried", lookups)
	}
	if got := ev.all(); len(got) != 1 || got[0].Reason != ReasonInvalidProbe || !strings.Contains(got[0].Message, "io.containerd.kata.v2") {
		t.Errorf("events %+v; want one InvalidProbe naming the runtime", got)
	}
}

// Probes from inside pods, many at once beside probes from the node, leave
// no thread of probed's in a pod's namespace.
func TestFromPodLeavesNoThreadBehind(t *testing.T) {
	pods := []*podServers{startPodServers(t), startPodServers(t)}
	node, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = node.Close() }()
	go func() {
		for {
			c, err := node.Accept()
			if err != nil {
				return
			}
			_ = c.Close()
		}
	}()
	_, nodePort := hostPort(t, node.Addr().String())
	p := New(nil, Options{UserAgent: NewUserAgent("1.37")})
	var wg sync.WaitGroup
	failures := make(chan string, 1)
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s := NewSession()
			defer s.Close()
			for i := range 30 {
				pod := pods[(g+i)%len(pods)]
				var spec *v1.Probe
				tgt := pod.target(true)
				tgt.Session = s
				switch (g + i) % 4 {
				case 0:
					spec = &v1.Probe{ProbeHandler: v1.ProbeHandler{HTTPGet: &v1.HTTPGetAction{Path: "/", Port: intstr.FromInt(pod.http), Scheme: v1.URISchemeHTTP}}}
				case 1:
					spec = &v1.Probe{ProbeHandler: v1.ProbeHandler{GRPC: &v1.GRPCAction{Port: int32(pod.grpc)}}}
				case 2:
					spec = &v1.Probe{ProbeHandler: v1.ProbeHandler{TCPSocket: &v1.TCPSocketAction{Port: intstr.FromInt(pod.tcp)}}}
				default: // from the node
					spec = &v1.Probe{ProbeHandler: v1.ProbeHandler{TCPSocket: &v1.TCPSocketAction{Port: intstr.FromInt(nodePort)}}}
					tgt = Target{PodIP: "127.0.0.1"}
				}
				spec.TimeoutSeconds = 2
				if res, out, err := p.runOnce(context.Background(), spec, tgt); res != Success {
					select {
					case failures <- fmt.Sprintf("%s %q %v", res, out, err):
					default:
					}
				}
			}
		}()
	}
	wg.Wait()
	close(failures)
	if f, ok := <-failures; ok {
		t.Errorf("a probe failed: %s", f)
	}
	out, err := netnstest.ThreadsOutside()
	if err != nil {
		t.Fatal(err)
	}
	if len(out) > 0 {
		t.Fatalf("threads left in a pod's namespace: %v", out)
	}
}
