package prober

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/probed-dev/probed/pkg/hostpolicy"
	"github.com/probed-dev/probed/pkg/probespec"
	"github.com/probed-dev/probed/pkg/results"
)

// These tests run probes against real listeners on loopback. As in the
// integration tier, the "pod" lives on 127.0.0.9: under deny-node-local its
// own IP is allowed although it is loopback, and every other loopback
// address stands for a service of the node.

const (
	podIP   = "127.0.0.9"
	nodeSvc = "127.0.0.5" // some other loopback address: a node-local service
	testNet = "192.0.2.10"
)

// countingListener accepts and counts connections on ip; it answers HTTP
// with 200 "ok" (and /redirect?to=URL with a 302 to URL).
type countingListener struct {
	ip    string
	port  int
	conns atomic.Int64
}

func listenCounting(t *testing.T, ip string) *countingListener {
	t.Helper()
	ln, err := net.Listen("tcp", net.JoinHostPort(ip, "0"))
	if err != nil {
		t.Skipf("cannot listen on %s: %v", ip, err)
	}
	cl := &countingListener{ip: ip, port: ln.Addr().(*net.TCPAddr).Port}
	mux := http.NewServeMux()
	mux.HandleFunc("/", func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("ok")) })
	mux.HandleFunc("/redirect", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, r.URL.Query().Get("to"), http.StatusFound)
	})
	srv := &http.Server{Handler: mux, ConnState: func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			cl.conns.Add(1)
		}
	}}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })
	return cl
}

func (c *countingListener) url(path string) string {
	return "http://" + net.JoinHostPort(c.ip, strconv.Itoa(c.port)) + path
}

// addrs parses IP literals; staticAddrs is an InterfaceAddrs that returns
// a fixed list.
func addrs(s ...string) []netip.Addr { return hostpolicy.ParsePodIPs(s...) }

func staticAddrs(s ...string) func() ([]netip.Addr, error) {
	return func() ([]netip.Addr, error) { return addrs(s...), nil }
}

func guardFor(policy hostpolicy.Policy, node ...string) *hostpolicy.Guard {
	return hostpolicy.NewGuard(policy, hostpolicy.GuardOptions{InterfaceAddrs: staticAddrs(node...)})
}

func proberWith(g *hostpolicy.Guard) *Prober { return New(nil, Options{HostGuard: g}) }

func httpGet(host, path string, port int) *v1.Probe {
	return &v1.Probe{TimeoutSeconds: 1, ProbeHandler: v1.ProbeHandler{HTTPGet: &v1.HTTPGetAction{
		Host: host, Path: path, Port: intstr.FromInt32(int32(port)),
	}}}
}

func tcpSocket(host string, port int) *v1.Probe {
	return &v1.Probe{TimeoutSeconds: 1, ProbeHandler: v1.ProbeHandler{TCPSocket: &v1.TCPSocketAction{
		Host: host, Port: intstr.FromInt32(int32(port)),
	}}}
}

var podTarget = Target{PodIP: podIP, PodIPs: []string{podIP}}

// expectRefused runs spec and wants a refusal naming reason and the policy,
// with an "errored" event, and no retry.
func expectRefused(t *testing.T, p *Prober, spec *v1.Probe, target Target, reason string) {
	t.Helper()
	sink := &recordingSink{}
	start := time.Now()
	res, out, err := p.Probe(context.Background(), probespec.Readiness, spec, target, sink)
	if err == nil || !hostpolicy.IsRefused(err) {
		t.Fatalf("Probe = %v, %q, %v; want a host policy refusal", res, out, err)
	}
	if res != results.Failure {
		t.Errorf("result = %v; want Failure (with the error, so the worker discards it)", res)
	}
	if !strings.Contains(err.Error(), reason) || !strings.Contains(err.Error(), "refused by --probe-host-policy="+string(p.guard.Policy())) {
		t.Errorf("error %q; want %q and the policy", err, reason)
	}
	if took := time.Since(start); took > 500*time.Millisecond {
		t.Errorf("refusal took %v: it should not wait on the network", took)
	}
	evs := sink.all()
	if len(evs) != 1 || evs[0].Reason != ReasonUnhealthy ||
		!strings.HasPrefix(evs[0].Message, "Readiness probe errored and resulted in unknown state: ") ||
		!strings.Contains(evs[0].Message, "refused by --probe-host-policy") {
		t.Errorf("events = %+v; want one Unhealthy 'errored' event with the refusal", evs)
	}
}

func expectSuccess(t *testing.T, p *Prober, spec *v1.Probe, target Target) {
	t.Helper()
	res, out, err := p.Probe(context.Background(), probespec.Readiness, spec, target, nil)
	if err != nil || res != results.Success {
		t.Fatalf("Probe = %v, %q, %v; want Success", res, out, err)
	}
}

// expectRedirectNotFollowed: a redirect to another host ends the probe with
// the kubelet's Warning (Success plus a ProbeWarning event).
func expectRedirectNotFollowed(t *testing.T, p *Prober, spec *v1.Probe, target Target) {
	t.Helper()
	sink := &recordingSink{}
	res, out, err := p.Probe(context.Background(), probespec.Readiness, spec, target, sink)
	if err != nil || res != results.Success || !strings.Contains(out, "Probe terminated redirects") {
		t.Fatalf("Probe = %v, %q, %v; want the kubelet's non-local redirect warning", res, out, err)
	}
}

func TestSSRFDenyNodeLocal(t *testing.T) {
	pod := listenCounting(t, podIP)
	node := listenCounting(t, nodeSvc)
	local := listenCounting(t, "127.0.0.1")
	p := proberWith(guardFor(hostpolicy.DenyNodeLocal))

	t.Run("pod IP allowed", func(t *testing.T) {
		expectSuccess(t, p, httpGet("", "/", pod.port), podTarget)
		expectSuccess(t, p, httpGet(podIP, "/", pod.port), podTarget)
		expectSuccess(t, p, tcpSocket("", pod.port), podTarget)
		expectSuccess(t, p, tcpSocket(podIP, pod.port), podTarget)
		// status.podIPs alone (a dual-stack pod's second IP, say) is enough.
		expectSuccess(t, p, httpGet(podIP, "/", pod.port), Target{PodIP: "127.0.0.99", PodIPs: []string{"127.0.0.99", podIP}})
	})
	t.Run("another loopback address refused", func(t *testing.T) {
		expectRefused(t, p, httpGet(nodeSvc, "/", node.port), podTarget, "127.0.0.5 is loopback")
		expectRefused(t, p, tcpSocket(nodeSvc, node.port), podTarget, "127.0.0.5 is loopback")
		expectRefused(t, p, httpGet("::ffff:"+nodeSvc, "/", node.port), podTarget, "is loopback")
	})
	t.Run("a name resolving to loopback refused when dialed", func(t *testing.T) {
		expectRefused(t, p, httpGet("localhost", "/", local.port), podTarget, "is loopback")
		expectRefused(t, p, tcpSocket("localhost", local.port), podTarget, "is loopback")
	})
	t.Run("metadata refused before dialing", func(t *testing.T) {
		expectRefused(t, p, httpGet("169.254.169.254", "/latest/meta-data/", 80), podTarget,
			"169.254.169.254 is link-local/metadata, refused by --probe-host-policy=deny-node-local")
		expectRefused(t, p, tcpSocket("fd00:ec2::254", 80), podTarget, "link-local/metadata")
		expectRefused(t, p, httpGet("168.63.129.16", "/machine?comp=goalstate", 80), podTarget,
			"168.63.129.16 is link-local/metadata")
		expectRefused(t, p, tcpSocket("fd00:42::42", 80), podTarget, "link-local/metadata")
		expectRefused(t, p, tcpSocket("64:ff9b:1::a9fe:a9fe", 80), podTarget,
			"NAT64 for 169.254.169.254, which is link-local/metadata")
	})
	t.Run("redirect to another port of the pod followed", func(t *testing.T) {
		other := listenCounting(t, podIP)
		before := other.conns.Load()
		expectSuccess(t, p, httpGet("", "/redirect?to="+other.url("/"), pod.port), podTarget)
		if other.conns.Load() == before {
			t.Error("same-host redirect not followed")
		}
	})
	t.Run("redirect to a node-local address not followed", func(t *testing.T) {
		// Another host: the kubelet's rule already stops there, with a
		// warning and no request sent, so the policy has nothing to refuse.
		expectRedirectNotFollowed(t, p, httpGet("", "/redirect?to="+local.url("/secret"), pod.port), podTarget)
		expectRedirectNotFollowed(t, p, httpGet("", "/redirect?to=http://169.254.169.254/latest/", pod.port), podTarget)
	})
	t.Run("no pod IP and no host refused", func(t *testing.T) {
		expectRefused(t, p, httpGet("", "/", local.port), Target{}, "no host and no pod IP")
		expectRefused(t, p, tcpSocket("", local.port), Target{}, "no host and no pod IP")
	})
	// Nothing above may have reached a node-local listener.
	if n := node.conns.Load() + local.conns.Load(); n != 0 {
		t.Errorf("%d connections reached node-local listeners", n)
	}
}

// TestSSRFNodeAddress: the node's own interface addresses are refused, read
// from the real interfaces. Nothing needs to listen: a refusal never dials.
func TestSSRFNodeAddress(t *testing.T) {
	ifAddrs, err := hostpolicy.InterfaceAddrs()
	if err != nil {
		t.Fatal(err)
	}
	var own netip.Addr
	for _, a := range ifAddrs {
		if !a.IsLoopback() && !a.IsLinkLocalUnicast() {
			own = a
			break
		}
	}
	p := proberWith(hostpolicy.NewGuard(hostpolicy.DenyNodeLocal, hostpolicy.GuardOptions{
		NodeAddrs: func(context.Context) ([]netip.Addr, error) { return addrs("198.51.100.7"), nil },
	}))
	p.guard.Refresh(context.Background())
	// A Node status address that is on no interface (a NATed ExternalIP).
	expectRefused(t, p, httpGet("198.51.100.7", "/", 80), podTarget, "198.51.100.7 is an address of this node")
	if !own.IsValid() {
		t.Skip("no non-loopback interface address on this machine")
	}
	expectRefused(t, p, tcpSocket(own.String(), 9), podTarget, own.String()+" is an address of this node")
	// A hostNetwork pod's IP is the node's: its own IP is still allowed.
	if err := p.guard.CheckHost(own.String(), hostpolicy.ParsePodIPs(own.String())); err != nil {
		t.Errorf("hostNetwork pod's own IP refused: %v", err)
	}
}

func TestSSRFPodIPsPolicy(t *testing.T) {
	pod := listenCounting(t, podIP)
	node := listenCounting(t, nodeSvc)
	p := proberWith(guardFor(hostpolicy.PodIPs))
	expectSuccess(t, p, httpGet("", "/", pod.port), podTarget)
	expectSuccess(t, p, tcpSocket(podIP, pod.port), podTarget)
	// A routable address that is not the pod's: refused before any dial, so
	// the TEST-NET address is never contacted (no timeout either).
	expectRefused(t, p, httpGet(testNet, "/", 80), podTarget, testNet+" is not one of the pod's IPs")
	expectRefused(t, p, tcpSocket(testNet, 80), podTarget, testNet+" is not one of the pod's IPs")
	expectRefused(t, p, tcpSocket(nodeSvc, node.port), podTarget, "not one of the pod's IPs")
	expectRedirectNotFollowed(t, p, httpGet("", "/redirect?to=http://"+testNet+"/", pod.port), podTarget)
	if n := node.conns.Load(); n != 0 {
		t.Errorf("%d connections reached the node-local listener", n)
	}
}

// TestSSRFKubeletPolicy: the kubelet policy checks nothing.
func TestSSRFKubeletPolicy(t *testing.T) {
	pod := listenCounting(t, podIP)
	node := listenCounting(t, nodeSvc)
	local := listenCounting(t, "127.0.0.1")
	for _, g := range []*hostpolicy.Guard{guardFor(hostpolicy.Kubelet), nil} {
		p := proberWith(g)
		expectSuccess(t, p, httpGet(nodeSvc, "/", node.port), podTarget)
		expectSuccess(t, p, tcpSocket(nodeSvc, node.port), podTarget)
		expectSuccess(t, p, httpGet("localhost", "/", local.port), podTarget)
		// As the kubelet: a redirect to another host is not followed; a warning.
		sink := &recordingSink{}
		res, _, err := p.Probe(context.Background(), probespec.Readiness, httpGet("", "/redirect?to="+local.url("/"), pod.port), podTarget, sink)
		if err != nil || res != results.Success || len(sink.all()) != 1 || sink.all()[0].Reason != ReasonProbeWarning {
			t.Errorf("redirect elsewhere = %v, %v, %+v; want Success with a ProbeWarning", res, err, sink.all())
		}
	}
	if node.conns.Load() == 0 || local.conns.Load() == 0 {
		t.Error("the kubelet policy did not reach the listeners")
	}
}

func TestSSRFGRPC(t *testing.T) {
	ln, err := net.Listen("tcp", net.JoinHostPort(podIP, "0"))
	if err != nil {
		t.Skipf("listen: %v", err)
	}
	s := grpc.NewServer()
	healthpb.RegisterHealthServer(s, health.NewServer())
	go func() { _ = s.Serve(ln) }()
	defer s.Stop()
	port := ln.Addr().(*net.TCPAddr).Port
	spec := &v1.Probe{TimeoutSeconds: 1, ProbeHandler: v1.ProbeHandler{GRPC: &v1.GRPCAction{Port: int32(port)}}}
	for _, policy := range []hostpolicy.Policy{hostpolicy.DenyNodeLocal, hostpolicy.PodIPs, hostpolicy.Kubelet} {
		t.Run(string(policy), func(t *testing.T) {
			p := proberWith(guardFor(policy))
			// gRPC has no host: the pod IP, which every policy allows.
			expectSuccess(t, p, spec, podTarget)
			if policy != hostpolicy.Kubelet {
				// The pod IP path is checked all the same: no pod IP would dial this node.
				expectRefused(t, p, spec, Target{}, "no host and no pod IP")
			}
		})
	}
}

// TestDialerChecksEveryDial: a probe's dialer applies the host policy at
// connect time by itself, whatever its caller checked before: in another
// pod's scope the pod's own loopback address is refused, for the TCP
// prober's dialer and the HTTP and gRPC one alike.
func TestDialerChecksEveryDial(t *testing.T) {
	pod := listenCounting(t, podIP)
	addr := net.JoinHostPort(podIP, strconv.Itoa(pod.port))
	g := guardFor(hostpolicy.DenyNodeLocal)
	for _, linger := range []bool{false, true} {
		other := scopeOf(g, Target{PodIP: "10.0.0.9"})
		if c, err := other.dialer(linger).DialContext(context.Background(), "tcp", addr); !hostpolicy.IsRefused(err) {
			if c != nil {
				_ = c.Close()
			}
			t.Errorf("linger=%v: dial of another pod's loopback IP: %v; want refused", linger, err)
		}
		c, err := scopeOf(g, podTarget).dialer(linger).DialContext(context.Background(), "tcp", addr)
		if err != nil {
			t.Fatalf("linger=%v: dial of the pod's own IP: %v", linger, err)
		}
		_ = c.Close()
	}
	deadline := time.Now().Add(5 * time.Second)
	for pod.conns.Load() < 2 && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	if n := pod.conns.Load(); n != 2 {
		t.Errorf("%d connections reached the pod; want the 2 allowed", n)
	}
}

// TestSSRFConcurrentPods: the scope is per probe, so concurrent probes of
// different pods through one Prober never borrow each other's pod IPs.
func TestSSRFConcurrentPods(t *testing.T) {
	a := listenCounting(t, "127.0.0.21")
	b := listenCounting(t, "127.0.0.22")
	p := proberWith(guardFor(hostpolicy.DenyNodeLocal))
	targetA := Target{PodIP: a.ip, PodIPs: []string{a.ip}}
	errs := make(chan error, 40)
	for i := range 20 {
		go func() {
			// Pod A probing pod B's address: refused, every time.
			_, _, err := p.Probe(context.Background(), probespec.Readiness, httpGet(b.ip, "/", b.port), targetA, nil)
			if !hostpolicy.IsRefused(err) {
				errs <- fmt.Errorf("probe %d of B from A: %v", i, err)
				return
			}
			errs <- nil
		}()
		go func() {
			res, _, err := p.Probe(context.Background(), probespec.Readiness, httpGet("", "/", a.port), targetA, nil)
			if err != nil || res != results.Success {
				errs <- fmt.Errorf("probe %d of A: %v %v", i, res, err)
				return
			}
			errs <- nil
		}()
	}
	for range 40 {
		if err := <-errs; err != nil {
			t.Error(err)
		}
	}
	if b.conns.Load() != 0 {
		t.Errorf("%d connections reached B", b.conns.Load())
	}
}
