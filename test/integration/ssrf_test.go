//go:build integration

package integration

import (
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
)

// The probe host policy (--probe-host-policy, docs/security.md) against the
// real API server. Pods live on 127.0.0.x as everywhere in this tier: their
// own IP is allowed although it is loopback; any other loopback address
// stands for a service of the node and must never be reached.

func hostHTTPProbe(host string, port int, path string) map[string]any {
	return map[string]any{"httpGet": map[string]any{"host": host, "path": path, "port": port}, "periodSeconds": 1}
}

// TestHostPolicyRefusesNodeLocalHosts: under the default policy a probe
// naming a link-local/metadata or node-local address is an InvalidProbe,
// with readiness False (InvalidProbe), and never runs; the pod's other
// probes, on its own IP, run.
func TestHostPolicyRefusesNodeLocalHosts(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ip := loopbackIP()
	web := startHTTPTarget(t, ip, true)
	node := startHTTPTarget(t, loopbackIP(), true) // a node-local service
	pod := e.createPod("ssrf", mustJSON(probes{
		"app":   {"readinessProbe": hostHTTPProbe("169.254.169.254", 80, "/latest/meta-data/")},
		"admin": {"readinessProbe": hostHTTPProbe(node.IP, node.Port, "/ready"), "livenessProbe": map[string]any{"tcpSocket": map[string]any{"host": node.IP, "port": node.Port}}},
		"web":   {"readinessProbe": hostHTTPProbe(ip, web.Port, "/ready")},
	}), true, container{name: "app"}, container{name: "admin"}, container{name: "web"})
	e.runPod(pod, ip, time.Minute)
	e.startProbed() // the default: --probe-host-policy=deny-node-local

	e.waitCond("ssrf", "ready.probed.io/web", v1.ConditionTrue, 20*time.Second)
	e.waitCond("ssrf", "ready.probed.io/app", v1.ConditionFalse, 10*time.Second)
	e.waitCond("ssrf", "ready.probed.io/admin", v1.ConditionFalse, 10*time.Second)
	e.waitCond("ssrf", "probed.io/ready", v1.ConditionFalse, 10*time.Second)

	wants := map[string]string{
		"app": `container "app" readinessProbe: httpGet.host: Forbidden: 169.254.169.254 is link-local/metadata, refused by --probe-host-policy=deny-node-local`,
		"admin": `container "admin" readinessProbe: httpGet.host: Forbidden: ` + node.IP +
			` is loopback, refused by --probe-host-policy=deny-node-local`,
	}
	for c, want := range wants {
		cond := condition(e.pod("ssrf"), "ready.probed.io/"+c)
		if cond.Reason != "InvalidProbe" || !strings.Contains(cond.Message, want) {
			t.Errorf("ready.probed.io/%s = %s %q; want InvalidProbe with %q", c, cond.Reason, cond.Message, want)
		}
	}
	wants["admin liveness"] = `container "admin" livenessProbe: tcpSocket.host: Forbidden: ` + node.IP +
		` is loopback, refused by --probe-host-policy=deny-node-local`
	for what, want := range wants {
		eventually(t, "InvalidProbe event for "+what, 15*time.Second, func() bool {
			ev := e.findEvent(pod.UID, "InvalidProbe", want)
			return ev != nil && ev.Type == v1.EventTypeWarning && ev.Source.Component == "probed"
		})
	}
	// The refused probes never ran: the node-local service saw nothing.
	consistently(t, "no request to the node-local service", 3*time.Second, func() bool { return node.hits.Load() == 0 })
	if web.hits.Load() == 0 {
		t.Error("the allowed probe never ran")
	}
}

// TestHostPolicyAtProbeTime: what only the dial can tell (a name that
// resolves to loopback) is refused when the probe runs: an error with the
// policy's message, readiness False, and nothing sent. A redirect to a
// node-local address is never followed, so nothing is sent there either.
func TestHostPolicyAtProbeTime(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ip := loopbackIP()
	// localhost is 127.0.0.1 (and ::1): a node service nobody may probe.
	local, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	localHits := make(chan struct{}, 100)
	go func() {
		for {
			c, err := local.Accept()
			if err != nil {
				return
			}
			localHits <- struct{}{}
			_ = c.Close()
		}
	}()
	t.Cleanup(func() { _ = local.Close() })
	localPort := local.Addr().(*net.TCPAddr).Port
	redirector := startRedirectTarget(t, ip, "http://127.0.0.1:"+itoa(int64(localPort))+"/secret")

	pod := e.createPod("dyn", mustJSON(probes{
		"byname":   {"readinessProbe": hostHTTPProbe("localhost", localPort, "/")},
		"redirect": {"readinessProbe": httpProbe(redirector.Port, "/", nil)},
	}), true, container{name: "byname"}, container{name: "redirect"})
	e.runPod(pod, ip, time.Minute)
	e.startProbed()

	// A name resolving to loopback is refused when dialed: a probe error, an
	// Unhealthy "errored" event, and the result is discarded, so readiness
	// stays False.
	eventually(t, "byname Unhealthy event", 20*time.Second, func() bool {
		return e.findEvent(pod.UID, "Unhealthy", "Readiness probe errored and resulted in unknown state: ") != nil &&
			e.findEvent(pod.UID, "Unhealthy", "is loopback, refused by --probe-host-policy=deny-node-local") != nil
	})
	// A redirect to another host is not followed, as in the kubelet: a
	// ProbeWarning, readiness True, and nothing is sent to the node.
	eventually(t, "redirect ProbeWarning event", 20*time.Second, func() bool {
		return e.findEvent(pod.UID, "ProbeWarning", "Readiness probe warning: Probe terminated redirects") != nil
	})
	e.waitCond("dyn", "ready.probed.io/redirect", v1.ConditionTrue, 20*time.Second)
	consistently(t, "byname readiness False", 2*time.Second, func() bool {
		return e.condIs("dyn", "ready.probed.io/byname", v1.ConditionFalse)
	})
	if redirector.hits.Load() == 0 {
		t.Error("the pod's own redirecting server was never probed")
	}
	select {
	case <-localHits:
		t.Error("a connection reached the node's loopback service")
	default:
	}
}

// TestHostPolicyKubelet: --probe-host-policy=kubelet checks nothing, as the
// kubelet; pod-ips refuses any address but the pod's own.
func TestHostPolicyKubeletAndPodIPs(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ip := loopbackIP()
	other := startHTTPTarget(t, loopbackIP(), true)
	pod := e.createPod("kub", mustJSON(probes{"app": {"readinessProbe": hostHTTPProbe(other.IP, other.Port, "/ready")}}),
		true, container{name: "app"})
	e.runPod(pod, ip, time.Minute)
	p := e.startProbed("--probe-host-policy=kubelet")
	e.waitCond("kub", "ready.probed.io/app", v1.ConditionTrue, 20*time.Second)
	if other.hits.Load() == 0 {
		t.Error("no request reached the other address")
	}
	p.Shutdown()

	// The same node under pod-ips: a routable address that is not the
	// pod's (TEST-NET-1, never dialed) is refused.
	e2 := newEnv(t)
	pod2 := e2.createPod("podips", mustJSON(probes{"app": {"readinessProbe": hostHTTPProbe("192.0.2.10", 80, "/")}}),
		true, container{name: "app"})
	e2.runPod(pod2, loopbackIP(), time.Minute)
	e2.startProbed("--probe-host-policy=pod-ips")
	e2.waitCond("podips", "ready.probed.io/app", v1.ConditionFalse, 20*time.Second)
	want := `container "app" readinessProbe: httpGet.host: Forbidden: 192.0.2.10 is not one of the pod's IPs, refused by --probe-host-policy=pod-ips`
	eventually(t, "InvalidProbe event", 15*time.Second, func() bool { return e2.findEvent(pod2.UID, "InvalidProbe", want) != nil })
	if c := condition(e2.pod("podips"), "ready.probed.io/app"); c.Reason != "InvalidProbe" {
		t.Errorf("condition %+v; want reason InvalidProbe", c)
	}
}

// startRedirectTarget serves, on ip, a 302 to location for every request.
func startRedirectTarget(t *testing.T, ip, location string) *httpTarget {
	t.Helper()
	ln, err := net.Listen("tcp", net.JoinHostPort(ip, "0"))
	if err != nil {
		t.Fatalf("listen: %v", err)
	}
	tg := &httpTarget{IP: ip, Port: ln.Addr().(*net.TCPAddr).Port}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		tg.hits.Add(1)
		http.Redirect(w, r, location, http.StatusFound)
	})}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })
	return tg
}
