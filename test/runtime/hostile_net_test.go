//go:build runtime

package runtimetest

import (
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/probed-dev/probed/internal/probetext"
	"github.com/probed-dev/probed/pkg/prober"
	"github.com/probed-dev/probed/pkg/results"
)

// hostileMargin is how long past its timeout (per attempt) a probe may take
// before it counts as held by the target: scheduling slack under -race on a
// small shared machine, not a speed target.
const hostileMargin = 3 * time.Second

const hostileTimeout = time.Second

func hostileHTTPSpec(scheme v1.URIScheme, port int) *v1.Probe {
	return &v1.Probe{TimeoutSeconds: int32(hostileTimeout / time.Second), ProbeHandler: v1.ProbeHandler{
		HTTPGet: &v1.HTTPGetAction{Scheme: scheme, Path: "/", Port: intstr.FromInt32(int32(port))}}}
}

func hostileTCPSpec(port int) *v1.Probe {
	return &v1.Probe{TimeoutSeconds: int32(hostileTimeout / time.Second), ProbeHandler: v1.ProbeHandler{
		TCPSocket: &v1.TCPSocketAction{Port: intstr.FromInt32(int32(port))}}}
}

func hostileGRPCSpec(port int) *v1.Probe {
	return &v1.Probe{TimeoutSeconds: int32(hostileTimeout / time.Second), ProbeHandler: v1.ProbeHandler{
		GRPC: &v1.GRPCAction{Port: int32(port)}}}
}

var loopbackPod = prober.Target{PodIP: "127.0.0.1", PodIPs: []string{"127.0.0.1"}}

// TestHostileNetwork probes hostile loopback servers and a black hole, and
// checks each probe returns within its timeout (per attempt) plus a margin,
// with at most 10 KiB of output, and reaches the kubelet's result, output
// and events: for httpGet, exactly what the kubelet's own code gets from the
// same server.
func TestHostileNetwork(t *testing.T) {
	p := prober.New(nil, prober.Options{})
	once := hostileTimeout + hostileMargin
	thrice := 3*hostileTimeout + hostileMargin

	// httpCase probes port over scheme and compares with the kubelet.
	httpCase := func(t *testing.T, scheme v1.URIScheme, port int, bound time.Duration) outcome {
		got := probeWithin(t, p, hostileHTTPSpec(scheme, port), loopbackPod, nil, bound)
		url := fmt.Sprintf("%s://127.0.0.1:%d/", strings.ToLower(string(scheme)), port)
		want := kubeletHTTP(url, hostileTimeout)
		t.Logf("probed:  %v\nkubelet: %v", got, want)
		if !sameOutcome(got, want) {
			t.Errorf("probed differs from the kubelet:\nprobed:  %v\nkubelet: %v", got, want)
		}
		return got
	}

	t.Run("1 GiB body", func(t *testing.T) {
		t.Parallel()
		for _, status := range []int{200, 500} {
			s, sent := bigBodyServer(t, status)
			got := httpCase(t, v1.URISchemeHTTP, s.port, once)
			switch status {
			case 200:
				if got.res != results.Success || got.out != strings.Repeat("x", prober.MaxOutputBytes) {
					t.Errorf("200: want success with the first 10 KiB, got %s and %d bytes", got.res, len(got.out))
				}
			case 500:
				if got.res != results.Failure || got.out != "HTTP probe failed with statuscode: 500" {
					t.Errorf("500: got %v", got)
				}
			}
			s.close()
			// Two probes (probed's and the kubelet's) read 10 KiB each; the
			// rest is at most what socket buffers took before the hang-up.
			if n := sent.Load(); n > 64<<20 {
				t.Errorf("server wrote %d MiB: the body was not abandoned", n>>20)
			}
			t.Logf("status %d: server wrote %d KiB of 1 GiB", status, sent.Load()>>10)
		}
	})

	t.Run("slowloris headers", func(t *testing.T) {
		t.Parallel()
		s := slowlorisServer(t)
		got := httpCase(t, v1.URISchemeHTTP, s.port, once)
		// Usually "context deadline exceeded (Client.Timeout exceeded while
		// awaiting headers)"; net/http words it by where the timer lands.
		prefix := fmt.Sprintf(`Get "http://127.0.0.1:%d/": `, s.port)
		if got.res != results.Failure || !strings.HasPrefix(got.out, prefix) || !strings.Contains(probetext.Normalise(got.out), "<timeout>") || got.err != nil {
			t.Errorf("want a timeout failure %q..., got %v", prefix, got)
		}
	})

	t.Run("slow body", func(t *testing.T) {
		t.Parallel()
		// A body that stalls is a read error, which the kubelet retries:
		// three attempts, each cut at the timeout.
		s := slowBodyServer(t)
		got := httpCase(t, v1.URISchemeHTTP, s.port, thrice)
		if got.res != results.Failure || got.err == nil || !strings.Contains(got.err.Error(), "while reading body") {
			t.Errorf("want an errored failure reading the body, got %v", got)
		}
	})

	t.Run("TLS handshake garbage", func(t *testing.T) {
		t.Parallel()
		s := tlsGarbageServer(t, nil, 64<<10)
		got := httpCase(t, v1.URISchemeHTTPS, s.port, once)
		prefix := fmt.Sprintf(`Get "https://127.0.0.1:%d/": `, s.port)
		if got.res != results.Failure || !strings.HasPrefix(got.out, prefix) {
			t.Errorf("want a failure %q..., got %v", prefix, got)
		}
	})

	t.Run("TLS record header then silence", func(t *testing.T) {
		t.Parallel()
		// A plausible handshake record header promising 16 KiB that never come.
		s := tlsGarbageServer(t, []byte{0x16, 0x03, 0x03, 0x3f, 0xff}, 64)
		got := httpCase(t, v1.URISchemeHTTPS, s.port, once)
		if got.res != results.Failure || !strings.Contains(probetext.Normalise(got.out), "<timeout>") {
			t.Errorf("want a timeout failure, got %v", got)
		}
	})

	t.Run("gRPC server that never answers", func(t *testing.T) {
		t.Parallel()
		s := silentServer(t)
		got := probeWithin(t, p, hostileGRPCSpec(s.port), loopbackPod, nil, once)
		want := fmt.Sprintf(`timeout: failed to connect service "127.0.0.1:%d" within 1s: context deadline exceeded`, s.port)
		if got.res != results.Failure || got.out != want || got.err != nil ||
			len(got.events) != 1 || got.events[0] != "Warning Unhealthy Readiness probe failed: "+want {
			t.Errorf("want failure %q, got %v", want, got)
		}
	})

	t.Run("TCP black hole", func(t *testing.T) {
		t.Parallel()
		ns := blackholeNetns(t)
		target := prober.Target{PodIP: blackholeAddr, PodIPs: []string{blackholeAddr}}
		got := probeWithin(t, p, hostileTCPSpec(80), target, ns, once)
		// net.DialTimeout's text, as the kubelet's DoTCPProbe reports it.
		want := "dial tcp " + blackholeAddr + ":80: i/o timeout"
		if got.res != results.Failure || got.out != want || got.err != nil ||
			len(got.events) != 1 || got.events[0] != "Warning Unhealthy Readiness probe failed: "+want {
			t.Errorf("want failure %q, got %v", want, got)
		}
	})

	t.Run("redirect chain across 20 ports", func(t *testing.T) {
		t.Parallel()
		ports := redirectChain(t, 20)
		got := httpCase(t, v1.URISchemeHTTP, ports[0], once)
		want := fmt.Sprintf(`Get "http://127.0.0.1:%d/hop10": stopped after 10 redirects`, ports[10])
		if got.res != results.Failure || got.out != want {
			t.Errorf("want failure %q, got %v", want, got)
		}
		// Nine hops are within the limit: the end of the chain answers.
		got = httpCase(t, v1.URISchemeHTTP, ports[10], once)
		if got.res != results.Success || got.out != "end of chain" {
			t.Errorf("9 redirects: want success, got %v", got)
		}
	})

	t.Run("redirect loop", func(t *testing.T) {
		t.Parallel()
		port := redirectLoop(t)
		got := httpCase(t, v1.URISchemeHTTP, port, once)
		if got.res != results.Failure || !strings.HasSuffix(got.out, `/loop": stopped after 10 redirects`) ||
			!strings.HasPrefix(got.out, `Get "http://127.0.0.1:`+strconv.Itoa(port)) {
			t.Errorf("want failure after 10 redirects, got %v", got)
		}
	})
}
