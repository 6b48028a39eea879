//go:build integration

package integration

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"
)

// Against the real API server: /metrics and /debug/probes answer 401 with
// no token or a token it does not know, 403 to a token whose account has no
// grant, and 200 to one bound to deploy/'s scraper roles, each role opening
// its own path; /healthz and /readyz answer without a token; all of it over
// TLS with probed's self-signed certificate.
func TestEndpointsAuthentication(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ip := loopbackIP()
	tg := startHTTPTarget(t, ip, true)
	e.runPod(e.createPod("web", mustJSON(probes{"app": {"readinessProbe": httpProbe(tg.Port, "/ready", nil)}}), true, container{name: "app"}), ip, time.Minute)
	p := e.startProbed()
	nobody, err := readerToken(e.ctx, "probed-it-nobody")
	if err != nil {
		t.Fatal(err)
	}
	metricsOnly, err := readerToken(e.ctx, "probed-it-metrics-only", "probed-metrics-reader")
	if err != nil {
		t.Fatal(err)
	}
	debugOnly, err := readerToken(e.ctx, "probed-it-debug-only", "probed-debug-reader")
	if err != nil {
		t.Fatal(err)
	}
	eventually(t, "/readyz without a token", 30*time.Second, func() bool {
		code, _ := p.getAs("/readyz", "")
		return code == http.StatusOK
	})
	for _, tc := range []struct {
		who, token string
		path       string
		code       int
		body       string
	}{
		{"no token", "", "/healthz", 200, "ok"},
		{"no token", "", "/metrics", 401, "Unauthorized"},
		{"no token", "", "/debug/probes", 401, "Unauthorized"},
		{"an unknown token", "not-a-token", "/metrics", 401, "Unauthorized"},
		{"an unknown token", "not-a-token", "/debug/probes", 401, "Unauthorized"},
		{"an unknown token", "not-a-token", "/readyz", 200, "[+] informer-synced ok"},
		{"no token", "", "/readyz?verbose", 401, "Unauthorized"},
		{"an unknown token", "not-a-token", "/readyz?verbose", 401, "Unauthorized"},
		// system:public-info-viewer lets every authenticated caller get /readyz.
		{"a token without RBAC", nobody, "/readyz?verbose", 200, "[+] informer-synced ok"},
		{"a token without RBAC", nobody, "/metrics", 403, `system:serviceaccount:probed-system:probed-it-nobody\" cannot get path \"/metrics\"`},
		{"a token without RBAC", nobody, "/debug/probes", 403, `cannot get path \"/debug/probes\"`},
		{"probed-metrics-reader", metricsOnly, "/metrics", 200, "probed_workers"},
		{"probed-metrics-reader", metricsOnly, "/debug/probes", 403, `cannot get path \"/debug/probes\"`},
		{"probed-debug-reader", debugOnly, "/debug/probes", 200, `"podName": "web"`},
		{"probed-debug-reader", debugOnly, "/metrics", 403, `cannot get path \"/metrics\"`},
		{"both roles", scraperToken, "/metrics", 200, "prober_probe_total"},
		{"both roles", scraperToken, "/debug/probes", 200, `"podName": "web"`},
	} {
		// The worker's first result may still be on its way, and a grant
		// made just now may reach the API server's RBAC cache just after
		// probed cached a denial (30s).
		var code int
		var body string
		err := wait.PollUntilContextTimeout(e.ctx, 100*time.Millisecond, 45*time.Second, true, func(context.Context) (bool, error) {
			code, body = p.getAs(tc.path, tc.token)
			return code == tc.code && strings.Contains(body, tc.body), nil
		})
		if err != nil {
			t.Errorf("%s with %s: %d %.300q, want %d with %q", tc.path, tc.who, code, body, tc.code, tc.body)
		}
	}

	// TLS only: plain HTTP to the port is refused, and what answers is
	// probed's self-signed certificate (HTTP/1.1).
	c := http.Client{Timeout: 5 * time.Second}
	if resp, err := c.Get("http://" + p.addr + "/healthz"); err == nil {
		resp.Body.Close()
		if resp.StatusCode != http.StatusBadRequest {
			t.Errorf("plain HTTP to probed's port: %d, want 400", resp.StatusCode)
		}
	}
	conn, err := tls.Dial("tcp", p.addr, &tls.Config{InsecureSkipVerify: true})
	if err != nil {
		t.Fatal(err)
	}
	st := conn.ConnectionState()
	conn.Close()
	if cert := st.PeerCertificates[0]; !strings.HasPrefix(cert.Subject.CommonName, e.node) || st.NegotiatedProtocol == "h2" {
		t.Errorf("certificate for %q (issuer %q), protocol %q; want self-signed for node %s over HTTP/1.1",
			cert.Subject.CommonName, cert.Issuer.CommonName, st.NegotiatedProtocol, e.node)
	}
}

// /debug/probes?namespace=&pod= narrows the list: either, both, nothing
// matching (an empty list), and bad input (400 with the reason).
func TestDebugProbesFilter(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	other := *e
	other.ns = e.ns + "-b"
	if err := cp.EnsureNamespace(e.ctx, other.ns); err != nil {
		t.Fatal(err)
	}
	ip := loopbackIP()
	tg := startHTTPTarget(t, ip, true)
	ann := mustJSON(probes{"app": {"readinessProbe": httpProbe(tg.Port, "/ready", nil)}})
	for _, env := range []*testEnv{e, &other} {
		for _, name := range []string{"web", "db"} {
			env.runPod(env.createPod(name, ann, true, container{name: "app"}), ip, time.Minute)
		}
	}
	p := e.startProbed()
	filtered := func(query string) []string {
		t.Helper()
		code, body := p.get("/debug/probes" + query)
		if code != http.StatusOK {
			t.Fatalf("/debug/probes%s: %d %s", query, code, body)
		}
		var out []debugEntry
		if err := json.Unmarshal([]byte(body), &out); err != nil {
			t.Fatalf("/debug/probes%s: %v: %s", query, err, body)
		}
		keys := []string{}
		for _, d := range out {
			keys = append(keys, d.PodNamespace+"/"+d.PodName)
		}
		return keys
	}
	eventually(t, "4 workers", 20*time.Second, func() bool { return len(filtered("")) == 4 })
	for query, want := range map[string]string{
		"?namespace=" + other.ns:               other.ns + "/db " + other.ns + "/web",
		"?pod=web":                             e.ns + "/web " + other.ns + "/web",
		"?namespace=" + e.ns + "&pod=db":       e.ns + "/db",
		"?namespace=" + e.ns + "&pod=missing":  "",
		"?namespace=no-such-namespace":         "",
		"?namespace=" + other.ns + "&pod=web&": other.ns + "/web",
	} {
		if got := strings.Join(filtered(query), " "); got != want {
			t.Errorf("/debug/probes%s: %q, want %q", query, got, want)
		}
	}
	for query, msg := range map[string]string{
		"?namespace=Bad_Namespace": `namespace "Bad_Namespace": a lowercase RFC 1123 label`,
		"?pod=a/b":                 `pod "a/b": a lowercase RFC 1123 subdomain`,
		"?node=" + e.node:          `unknown query parameter "node"`,
		"?pod=web&pod=db":          `query parameter "pod" given 2 times`,
	} {
		if code, body := p.get("/debug/probes" + query); code != http.StatusBadRequest || !strings.Contains(body, msg) {
			t.Errorf("/debug/probes%s: %d %q, want 400 with %q", query, code, body, msg)
		}
	}
}

// --metrics-insecure-serving serves plain HTTP without authentication on a
// loopback address, and probed refuses to start with it on any other.
func TestMetricsInsecureServing(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	p := e.startProbed("--metrics-insecure-serving")
	if code, body := p.getAs("/metrics", ""); code != http.StatusOK || !strings.Contains(body, "probed_workers") {
		t.Errorf("insecure /metrics without a token: %d %.200q", code, body)
	}
	if code, _ := p.getAs("/debug/probes", ""); code != http.StatusOK {
		t.Errorf("insecure /debug/probes without a token: %d", code)
	}

	for _, addr := range []string{"0.0.0.0:0", ":0", "[::]:0"} {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		cmd := exec.CommandContext(ctx, probedBin, "--kubeconfig="+e.kubeconfig, "--node-name="+e.node,
			"--runtime-type=none", "--metrics-insecure-serving", "--metrics-bind-address="+addr)
		out, err := cmd.CombinedOutput()
		cancel()
		var exit *exec.ExitError
		if !errors.As(err, &exit) || exit.ExitCode() != 2 || !strings.Contains(string(out), "is not a loopback address") {
			t.Errorf("--metrics-insecure-serving --metrics-bind-address=%s: %v, %q; want exit 2 naming the loopback rule", addr, err, out)
		}
	}
}

// With --tls-cert-file and --tls-private-key-file, probed serves that
// certificate: a client that trusts only its CA connects to 127.0.0.1.
func TestServingCertificateFromFiles(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	p := e.startProbed(servingCert.args()...)
	caPEM, err := os.ReadFile(servingCert.caFile)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(caPEM)
	c := http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}}
	req, _ := http.NewRequest(http.MethodGet, "https://"+p.addr+"/metrics", nil)
	req.Header.Set("Authorization", "Bearer "+scraperToken)
	resp, err := c.Do(req)
	if err != nil {
		t.Fatalf("verifying probed's certificate against the CA: %v", err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Errorf("/metrics: %d", resp.StatusCode)
	}
}
