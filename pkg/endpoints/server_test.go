package endpoints

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/probed-dev/probed/pkg/worker"
)

func get(t *testing.T, h http.Handler, path string) (int, string) {
	t.Helper()
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, path, nil))
	b, _ := io.ReadAll(rec.Result().Body)
	return rec.Code, string(b)
}

func testRegistry() *prometheus.Registry {
	reg := prometheus.NewRegistry()
	c := prometheus.NewCounter(prometheus.CounterOpts{Name: "probed_test_total", Help: "test"})
	reg.MustRegister(c)
	c.Inc()
	return reg
}

func TestEndpoints(t *testing.T) {
	synced := false
	h, err := Handler(Options{
		Insecure: true,
		Gatherer: testRegistry(),
		Ready: []Check{{Name: "informer", Fn: func(context.Context) error {
			if !synced {
				return errors.New("not synced")
			}
			return nil
		}}},
		Probes: func() []worker.Snapshot { return []worker.Snapshot{{PodNamespace: "ns", PodName: "p"}} },
	})
	if err != nil {
		t.Fatal(err)
	}
	if code, body := get(t, h, "/healthz"); code != 200 || !strings.Contains(body, "ok") {
		t.Fatalf("/healthz = %d %q", code, body)
	}
	if code, body := get(t, h, "/readyz"); code != 503 || body != "[-] informer failed: reason withheld\n" {
		t.Fatalf("/readyz before sync = %d %q", code, body)
	}
	// Development mode has no authentication: ?verbose gives the reason.
	if code, body := get(t, h, "/readyz?verbose"); code != 503 || !strings.Contains(body, "[-] informer: not synced") {
		t.Fatalf("/readyz?verbose before sync = %d %q", code, body)
	}
	synced = true
	if code, body := get(t, h, "/readyz"); code != 200 || !strings.Contains(body, "[+] informer ok") {
		t.Fatalf("/readyz after sync = %d %q", code, body)
	}
	if code, body := get(t, h, "/metrics"); code != 200 || !strings.Contains(body, "probed_test_total 1") {
		t.Fatalf("/metrics = %d %q", code, body)
	}
	code, body := get(t, h, "/debug/probes")
	var doc []worker.Snapshot
	if code != 200 || json.Unmarshal([]byte(body), &doc) != nil || len(doc) != 1 || doc[0].PodName != "p" {
		t.Fatalf("/debug/probes = %d %q", code, body)
	}
}

// Without Auth, the guarded paths are not served at all unless the caller
// asked for the insecure mode.
func TestHandlerNeedsAuthUnlessInsecure(t *testing.T) {
	if _, err := Handler(Options{Gatherer: testRegistry()}); err == nil {
		t.Fatal("a handler without Auth and without Insecure was built")
	}
}

func TestCheckInsecureAddr(t *testing.T) {
	for addr, ok := range map[string]bool{
		"127.0.0.1:9809": true, "127.0.0.2:1": true, "[::1]:9809": true,
		":9809": false, "0.0.0.0:9809": false, "[::]:9809": false, "10.0.0.1:9809": false,
		"localhost:9809": false, "node-a:9809": false, "127.0.0.1": false,
	} {
		if err := CheckInsecureAddr(addr); (err == nil) != ok {
			t.Errorf("CheckInsecureAddr(%q) = %v, want ok=%v", addr, err, ok)
		}
	}
}
