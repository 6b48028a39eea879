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
)

func get(t *testing.T, h http.Handler, path string) (int, string) {
	t.Helper()
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, path, nil))
	b, _ := io.ReadAll(rec.Result().Body)
	return rec.Code, string(b)
}

func TestEndpoints(t *testing.T) {
	reg := prometheus.NewRegistry()
	c := prometheus.NewCounter(prometheus.CounterOpts{Name: "probed_test_total", Help: "test"})
	reg.MustRegister(c)
	c.Inc()
	synced := false
	h := Handler(Options{
		Gatherer: reg,
		Ready: []Check{{Name: "informer", Fn: func(context.Context) error {
			if !synced {
				return errors.New("not synced")
			}
			return nil
		}}},
		Probes: func() any { return []map[string]string{{"pod": "ns/p"}} },
	})
	if code, body := get(t, h, "/healthz"); code != 200 || !strings.Contains(body, "ok") {
		t.Fatalf("/healthz = %d %q", code, body)
	}
	if code, body := get(t, h, "/readyz"); code != 503 || !strings.Contains(body, "informer: not synced") {
		t.Fatalf("/readyz before sync = %d %q", code, body)
	}
	synced = true
	if code, body := get(t, h, "/readyz"); code != 200 || !strings.Contains(body, "[+] informer ok") {
		t.Fatalf("/readyz after sync = %d %q", code, body)
	}
	if code, body := get(t, h, "/metrics"); code != 200 || !strings.Contains(body, "probed_test_total 1") {
		t.Fatalf("/metrics = %d %q", code, body)
	}
	code, body := get(t, h, "/debug/probes")
	var doc []map[string]string
	if code != 200 || json.Unmarshal([]byte(body), &doc) != nil || doc[0]["pod"] != "ns/p" {
		t.Fatalf("/debug/probes = %d %q", code, body)
	}
}
