package endpoints

import (
	"encoding/json"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/probed-dev/probed/pkg/worker"
)

func TestDebugProbesFilter(t *testing.T) {
	snaps := []worker.Snapshot{
		{PodNamespace: "a", PodName: "web", Container: "app", ProbeType: "Readiness"},
		{PodNamespace: "a", PodName: "web", Container: "app", ProbeType: "Liveness"},
		{PodNamespace: "a", PodName: "db", Container: "db", ProbeType: "Readiness"},
		{PodNamespace: "b", PodName: "web", Container: "app", ProbeType: "Readiness"},
	}
	h := debugProbes(func() []worker.Snapshot { return snaps })
	keys := func(body string) []string {
		t.Helper()
		var doc []worker.Snapshot
		if err := json.Unmarshal([]byte(body), &doc); err != nil {
			t.Fatalf("%v: %q", err, body)
		}
		out := []string{}
		for _, s := range doc {
			out = append(out, s.PodNamespace+"/"+s.PodName+"/"+s.ProbeType)
		}
		return out
	}
	for query, want := range map[string][]string{
		"":                        {"a/web/Readiness", "a/web/Liveness", "a/db/Readiness", "b/web/Readiness"},
		"?namespace=a":            {"a/web/Readiness", "a/web/Liveness", "a/db/Readiness"},
		"?pod=web":                {"a/web/Readiness", "a/web/Liveness", "b/web/Readiness"},
		"?namespace=b&pod=web":    {"b/web/Readiness"},
		"?namespace=a&pod=db":     {"a/db/Readiness"},
		"?namespace=c":            {},
		"?pod=nope":               {},
		"?namespace=b&pod=db":     {},
		"?namespace=&pod=":        {"a/web/Readiness", "a/web/Liveness", "a/db/Readiness", "b/web/Readiness"},
		"?pod=web.v1-2&namespace": {},
	} {
		code, body := get(t, h, "/debug/probes"+query)
		if code != http.StatusOK {
			t.Errorf("%q: %d %q", query, code, body)
			continue
		}
		if got := keys(body); !slices.Equal(got, want) {
			t.Errorf("%q: %v, want %v", query, got, want)
		}
	}
	for query, msg := range map[string]string{
		"?namespace=Not_A_Namespace":            `namespace "Not_A_Namespace": a lowercase RFC 1123 label`,
		"?pod=Bad/Pod":                          `pod "Bad/Pod": a lowercase RFC 1123 subdomain`,
		"?namespace=a&namespace=b":              `query parameter "namespace" given 2 times`,
		"?node=x":                               `unknown query parameter "node": /debug/probes takes namespace and pod`,
		"?pod=%zz":                              "malformed query",
		"?namespace=" + strings.Repeat("a", 64): "must be no more than 63 characters",
	} {
		code, body := get(t, h, "/debug/probes"+query)
		if code != http.StatusBadRequest || !strings.Contains(body, msg) {
			t.Errorf("%q: %d %q, want 400 with %q", query, code, body, msg)
		}
	}
}
