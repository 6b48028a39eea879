package prober

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/probed-dev/probed/pkg/hostpolicy"
	"github.com/probed-dev/probed/pkg/probespec"
)

// probeHTTP runs only the HTTP handler against 127.0.0.1:port, so that
// tests see the handler's own Result (Warning included) and error.
func probeHTTP(t *testing.T, p *Prober, path string, port int, timeout time.Duration, headers ...v1.HTTPHeader) (Result, string, error) {
	t.Helper()
	action := &v1.HTTPGetAction{Path: path, Port: intstr.FromInt32(int32(port)), HTTPHeaders: headers}
	req, err := newHTTPRequest(context.Background(), action, Target{PodIP: "127.0.0.1"}, p.http.userAgent.Probe())
	if err != nil {
		t.Fatal(err)
	}
	return p.http.probe(req, timeout)
}

func TestHTTPStatusCodes(t *testing.T) {
	mux := http.NewServeMux()
	mux.HandleFunc("/status/{code}", func(w http.ResponseWriter, r *http.Request) {
		code, _ := strconv.Atoi(r.PathValue("code"))
		w.WriteHeader(code)
		_, _ = fmt.Fprintf(w, "body %d", code)
	})
	mux.HandleFunc("/moved", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Location", "/status/200")
		w.WriteHeader(http.StatusFound)
	})
	_, _, port := serve(t, mux)
	p := New(nil, Options{})

	cases := []struct {
		path       string
		wantResult Result
		wantOutput string
	}{
		{"/status/200", Success, "body 200"},
		{"/status/204", Success, ""},
		{"/moved", Success, "body 200"}, // 302 to the same host is followed
		{"/status/300", Warning, "Probe terminated redirects, Response body: body 300"},
		{"/status/399", Warning, "Probe terminated redirects, Response body: body 399"},
		{"/status/400", Failure, "HTTP probe failed with statuscode: 400"},
		{"/status/404", Failure, "HTTP probe failed with statuscode: 404"},
		{"/status/500", Failure, "HTTP probe failed with statuscode: 500"},
		{"/status/503", Failure, "HTTP probe failed with statuscode: 503"},
	}
	for _, tc := range cases {
		t.Run(tc.path, func(t *testing.T) {
			res, out, err := probeHTTP(t, p, tc.path, port, time.Second)
			if err != nil {
				t.Fatalf("unexpected error: %v", err)
			}
			if res != tc.wantResult || out != tc.wantOutput {
				t.Errorf("probe = %v, %q; want %v, %q", res, out, tc.wantResult, tc.wantOutput)
			}
		})
	}
}

func TestHTTPTimeout(t *testing.T) {
	release := make(chan struct{})
	_, _, port := serve(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-release:
		case <-r.Context().Done():
		}
	}))
	defer close(release)

	p := New(nil, Options{})
	start := time.Now()
	res, out, err := probeHTTP(t, p, "/slow", port, 200*time.Millisecond)
	if err != nil {
		t.Fatalf("a timeout is a failure, not an error: %v", err)
	}
	want := fmt.Sprintf(`Get "http://127.0.0.1:%d/slow": context deadline exceeded (Client.Timeout exceeded while awaiting headers)`, port)
	if res != Failure || out != want {
		t.Errorf("probe = %v, %q; want Failure, %q", res, out, want)
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Errorf("probe took %v", d)
	}
}

func TestHTTPTransportErrorIsFailure(t *testing.T) {
	port := closedPort(t)
	p := New(nil, Options{})
	res, out, err := probeHTTP(t, p, "/", port, time.Second)
	want := fmt.Sprintf(`Get "http://127.0.0.1:%d/": dial tcp 127.0.0.1:%d: connect: connection refused`, port, port)
	if err != nil || res != Failure || out != want {
		t.Errorf("probe = %v, %q, %v; want Failure, %q, nil", res, out, err, want)
	}
}

// TestHTTPBodyReadErrorIsError: when the body breaks off mid-way the kubelet
// returns an error (which is then retried), not a plain failure.
func TestHTTPBodyReadErrorIsError(t *testing.T) {
	_, _, port := serve(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Length", "100")
		_, _ = w.Write([]byte("short"))
	}))
	p := New(nil, Options{})
	res, out, err := probeHTTP(t, p, "/", port, time.Second)
	if err == nil || res != Failure || out != "" {
		t.Errorf("probe = %v, %q, %v; want Failure, \"\", an error", res, out, err)
	}
}

func TestHTTPRedirects(t *testing.T) {
	// other serves the far end of redirects and counts its hits.
	var otherHits atomic.Int32
	otherMux := http.NewServeMux()
	otherMux.HandleFunc("/ok", func(w http.ResponseWriter, r *http.Request) {
		otherHits.Add(1)
		_, _ = w.Write([]byte("other ok"))
	})
	_, _, otherPort := serve(t, otherMux)

	mux := http.NewServeMux()
	mux.HandleFunc("/to", func(w http.ResponseWriter, r *http.Request) {
		loc := r.URL.Query().Get("loc")
		w.Header().Set("Location", loc)
		w.WriteHeader(http.StatusFound)
		_, _ = w.Write([]byte("moved to " + loc))
	})
	mux.HandleFunc("/loop", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "/loop", http.StatusFound)
	})
	// /chain/N takes N more redirects to reach a 200.
	mux.HandleFunc("/chain/{n}", func(w http.ResponseWriter, r *http.Request) {
		n, _ := strconv.Atoi(r.PathValue("n"))
		if n == 0 {
			_, _ = w.Write([]byte("end of chain"))
			return
		}
		http.Redirect(w, r, "/chain/"+strconv.Itoa(n-1), http.StatusTemporaryRedirect)
	})
	_, _, port := serve(t, mux)
	p := New(nil, Options{})

	to := func(loc string) string { return "/to?loc=" + url.QueryEscape(loc) }
	sameHostOtherPort := fmt.Sprintf("http://127.0.0.1:%d/ok", otherPort)
	otherHost := fmt.Sprintf("http://localhost:%d/ok", otherPort)

	cases := []struct {
		name       string
		path       string
		wantResult Result
		wantOutput string
		otherHits  int32
	}{
		{"same host, other port: followed", to(sameHostOtherPort), Success, "other ok", 1},
		{"other host: not followed, warning with body", to(otherHost), Warning,
			"Probe terminated redirects, Response body: moved to " + otherHost, 0},
		{"loop", "/loop", Failure,
			fmt.Sprintf(`Get "/loop": stopped after 10 redirects`), 0},
		// Go's and the kubelet's policy allows 10 requests: 9 redirects.
		{"9 redirects", "/chain/9", Success, "end of chain", 0},
		{"10 redirects", "/chain/10", Failure,
			fmt.Sprintf(`Get "/chain/0": stopped after 10 redirects`), 0},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			otherHits.Store(0)
			res, out, err := probeHTTP(t, p, tc.path, port, time.Second)
			if err != nil {
				t.Fatalf("unexpected error: %v", err)
			}
			if res != tc.wantResult || out != tc.wantOutput {
				t.Errorf("probe = %v, %q; want %v, %q", res, out, tc.wantResult, tc.wantOutput)
			}
			if got := otherHits.Load(); got != tc.otherHits {
				t.Errorf("other server hit %d times; want %d", got, tc.otherHits)
			}
		})
	}
}

// TestHTTPRedirectsConcurrently runs redirecting probes in parallel on one
// Prober: the redirect policy must hold no state shared between probes.
func TestHTTPRedirectsConcurrently(t *testing.T) {
	mux := http.NewServeMux()
	mux.HandleFunc("/chain/{n}", func(w http.ResponseWriter, r *http.Request) {
		n, _ := strconv.Atoi(r.PathValue("n"))
		if n == 0 {
			_, _ = w.Write([]byte("done"))
			return
		}
		http.Redirect(w, r, "/chain/"+strconv.Itoa(n-1), http.StatusFound)
	})
	_, _, port := serve(t, mux)
	p := New(nil, Options{})
	var wg sync.WaitGroup
	for i := range 20 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			n := 9
			want := Success
			if i%2 == 1 {
				n, want = 10, Failure
			}
			action := &v1.HTTPGetAction{Path: "/chain/" + strconv.Itoa(n), Port: intstr.FromInt32(int32(port))}
			req, err := newHTTPRequest(context.Background(), action, Target{PodIP: "127.0.0.1"}, p.http.userAgent.Probe())
			if err != nil {
				t.Error(err)
				return
			}
			if res, out, _ := p.http.probe(req, 5*time.Second); res != want {
				t.Errorf("chain %d: %v %q; want %v", n, res, out, want)
			}
		}()
	}
	wg.Wait()
}

// TestHTTPHostHeaderAcrossRedirect: the Host header is sent as the request's
// Host and, as in Go's client (and so the kubelet), kept across a relative
// same-host redirect.
func TestHTTPHostHeaderAcrossRedirect(t *testing.T) {
	var mu sync.Mutex
	hosts := map[string]string{}
	mux := http.NewServeMux()
	mux.HandleFunc("/start", func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		hosts["start"] = r.Host
		mu.Unlock()
		http.Redirect(w, r, "/end", http.StatusFound)
	})
	mux.HandleFunc("/end", func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		hosts["end"] = r.Host
		mu.Unlock()
		_, _ = w.Write([]byte("end"))
	})
	_, _, port := serve(t, mux)
	p := New(nil, Options{})
	res, out, err := probeHTTP(t, p, "/start", port, time.Second, hdr("Host", "vhost.example"))
	if err != nil || res != Success || out != "end" {
		t.Fatalf("probe = %v, %q, %v", res, out, err)
	}
	mu.Lock()
	defer mu.Unlock()
	if hosts["start"] != "vhost.example" || hosts["end"] != "vhost.example" {
		t.Errorf("hosts seen = %v; want vhost.example for both", hosts)
	}
}

func TestHTTPBodyTruncated(t *testing.T) {
	big := strings.Repeat("x", 3*MaxOutputBytes)
	_, _, port := serve(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/redirect" {
			w.Header().Set("Location", "http://localhost/")
			w.WriteHeader(http.StatusFound)
		}
		_, _ = w.Write([]byte(big))
	}))
	p := New(nil, Options{})

	res, out, err := probeHTTP(t, p, "/", port, time.Second)
	if err != nil || res != Success {
		t.Fatalf("probe = %v, %v", res, err)
	}
	if out != big[:MaxOutputBytes] {
		t.Errorf("output has %d bytes; want the first %d", len(out), MaxOutputBytes)
	}

	res, out, err = probeHTTP(t, p, "/redirect", port, time.Second)
	want := "Probe terminated redirects, Response body: " + big[:MaxOutputBytes]
	if err != nil || res != Warning || out != want {
		t.Errorf("redirect probe = %v, %d bytes, %v; want Warning with a truncated body", res, len(out), err)
	}
}

func TestHTTPSSelfSigned(t *testing.T) {
	for _, h2 := range []bool{false, true} {
		t.Run(fmt.Sprintf("http2=%v", h2), func(t *testing.T) {
			var proto atomic.Value
			s := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				proto.Store(r.Proto)
				_, _ = w.Write([]byte("secure"))
			}))
			s.EnableHTTP2 = h2
			s.StartTLS()
			defer s.Close()
			_, port := hostPort(t, s.Listener.Addr().String())

			spec := httpSpec("/", port)
			spec.HTTPGet.Scheme = v1.URISchemeHTTPS
			p := New(nil, Options{})
			res, out, err := p.Probe(context.Background(), probespec.Liveness, spec, Target{PodIP: "127.0.0.1"}, nil)
			if err != nil || res.String() != "Success" || out != "secure" {
				t.Fatalf("Probe = %v, %q, %v", res, out, err)
			}
			// Like the kubelet, HTTP/2 is used when the pod offers it over TLS.
			want := "HTTP/1.1"
			if h2 {
				want = "HTTP/2.0"
			}
			if got := proto.Load(); got != want {
				t.Errorf("protocol = %v; want %s", got, want)
			}
		})
	}
}

// TestHTTPIgnoresProxyEnv: probes reach pods directly even when the daemon's
// environment names a proxy.
func TestHTTPIgnoresProxyEnv(t *testing.T) {
	var proxyHits atomic.Int32
	proxy, _, _ := serve(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		proxyHits.Add(1)
		w.WriteHeader(http.StatusBadGateway)
	}))
	for _, k := range []string{"HTTP_PROXY", "http_proxy", "HTTPS_PROXY", "https_proxy"} {
		t.Setenv(k, proxy.URL)
	}
	for _, k := range []string{"NO_PROXY", "no_proxy"} {
		t.Setenv(k, "")
	}
	_, _, port := serve(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = w.Write([]byte("direct"))
	}))

	p := New(nil, Options{})
	res, out, err := p.Probe(context.Background(), probespec.Readiness, httpSpec("/", port), Target{PodIP: "127.0.0.1"}, nil)
	if err != nil || res.String() != "Success" || out != "direct" {
		t.Fatalf("Probe = %v, %q, %v", res, out, err)
	}
	if n := proxyHits.Load(); n != 0 {
		t.Errorf("proxy got %d requests", n)
	}
	// Go never proxies loopback targets, so also ask the transport directly
	// about a pod-like address it would otherwise send to the proxy.
	req, _ := http.NewRequest(http.MethodGet, "http://10.1.2.3:8080/", nil)
	if u, err := p.http.transport.Proxy(req); u != nil || err != nil {
		t.Errorf("transport proxy for a pod IP = %v, %v; want none", u, err)
	}
}

// TestHTTPCancelled: a probe whose caller goes away ends at once, with the
// caller's error and no event.
func TestHTTPCancelled(t *testing.T) {
	release := make(chan struct{})
	_, _, port := serve(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-release:
		case <-r.Context().Done():
		}
	}))
	defer close(release)

	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(100*time.Millisecond, cancel)
	sink := &recordingSink{}
	p := New(nil, Options{})
	spec := httpSpec("/", port)
	spec.TimeoutSeconds = 10
	res, _, err := p.Probe(ctx, probespec.Liveness, spec, Target{PodIP: "127.0.0.1"}, sink)
	if err != context.Canceled || res.String() != "Failure" {
		t.Errorf("Probe = %v, %v; want Failure, context.Canceled", res, err)
	}
	if ev := sink.all(); len(ev) != 0 {
		t.Errorf("events = %v; want none", ev)
	}
}

// TestRedirectBodyOnlyOfThePodsOwnAnswer (issue 30, item 3): a redirect to
// another host ends the probe with the kubelet's warning, which quotes the
// 3xx body. That body is published only where a body check could read it:
// the pod's own answer, on its IP. A probe with a host (any host, the pod's
// own IP written out too, under every policy) gets the text without it.
func TestRedirectBodyOnlyOfThePodsOwnAnswer(t *testing.T) {
	const body = "internal-token=s3cr3t"
	_, ip, port := serve(t, http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Location", "http://192.0.2.1/elsewhere")
		w.WriteHeader(http.StatusFound)
		_, _ = w.Write([]byte(body))
	}))
	probe := func(host string) *v1.Probe {
		return &v1.Probe{TimeoutSeconds: 1, ProbeHandler: v1.ProbeHandler{HTTPGet: &v1.HTTPGetAction{
			Host: host, Path: "/", Port: intstr.FromInt32(int32(port))}}}
	}
	target := Target{PodIP: ip, PodIPs: []string{ip}}
	for _, tc := range []struct {
		name   string
		policy hostpolicy.Policy
		host   string
		want   string
	}{
		{"the pod's IP: the kubelet's text", hostpolicy.DenyNodeLocal, "", "Probe terminated redirects, Response body: " + body},
		{"the pod's IP, under the kubelet policy", hostpolicy.Kubelet, "", "Probe terminated redirects, Response body: " + body},
		{"a host, under the kubelet policy", hostpolicy.Kubelet, ip, `Probe terminated redirects, Response body: "<withheld>"`},
		{"the pod's IP as host", hostpolicy.DenyNodeLocal, ip, `Probe terminated redirects, Response body: "<withheld>"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			opts := Options{}
			if tc.policy != hostpolicy.Kubelet {
				opts.HostGuard = guardFor(tc.policy)
			}
			sink := &recordingSink{}
			res, out, err := New(nil, opts).Probe(context.Background(), probespec.Readiness, probe(tc.host), target, sink)
			if err != nil || res.String() != "Success" || out != tc.want {
				t.Errorf("Probe = %v, %q, %v; want Success, %q", res, out, err, tc.want)
			}
			want := []event{{v1.EventTypeWarning, ReasonProbeWarning, "Readiness probe warning: " + tc.want}}
			if got := sink.all(); fmt.Sprint(got) != fmt.Sprint(want) {
				t.Errorf("events %v; want %v", got, want)
			}
		})
	}
}
