package prober

import (
	"context"
	"fmt"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/probed-dev/probed/pkg/probespec"
	"github.com/probed-dev/probed/pkg/results"
)

// TestHTTPCheck runs httpGet probes with response checks against a real
// loopback server, and wants the result, message and event of each.
func TestHTTPCheck(t *testing.T) {
	big := strings.Repeat("a", MaxOutputBytes)
	mux := http.NewServeMux()
	mux.HandleFunc("/status/{code}", func(w http.ResponseWriter, r *http.Request) {
		code, _ := strconv.Atoi(r.PathValue("code"))
		w.WriteHeader(code)
		_, _ = fmt.Fprintf(w, "body %d", code)
	})
	mux.HandleFunc("/body/{text}", func(w http.ResponseWriter, r *http.Request) {
		_, _ = w.Write([]byte(r.PathValue("text")))
	})
	// Chunked, as well as delimited.
	mux.HandleFunc("/chunked/{text}", func(w http.ResponseWriter, r *http.Request) {
		w.(http.Flusher).Flush()
		_, _ = w.Write([]byte(r.PathValue("text")))
	})
	// The mark lies just past the first 10 KiB.
	mux.HandleFunc("/big", func(w http.ResponseWriter, r *http.Request) {
		_, _ = w.Write([]byte(big + "MARK"))
	})
	_, _, port := serve(t, mux)

	re := regexp.MustCompile
	cases := []struct {
		name    string
		path    string
		check   *probespec.HTTPCheck
		want    results.Result
		wantOut string
	}{
		{"no check", "/status/204", nil, results.Success, ""},
		{"no check 500", "/status/500", nil, results.Failure, "HTTP probe failed with statuscode: 500"},
		{"status listed", "/status/204", &probespec.HTTPCheck{Status: []int{200, 204}}, results.Success, ""},
		{"status not listed", "/status/200", &probespec.HTTPCheck{Status: []int{204}}, results.Failure,
			"HTTP probe failed with statuscode: 200 (probed.io/expectStatus: [204])"},
		{"status overrides the 2xx-3xx rule", "/status/503", &probespec.HTTPCheck{Status: []int{503}}, results.Success, "body 503"},
		{"expected 3xx is a plain success", "/status/301", &probespec.HTTPCheck{Status: []int{301}}, results.Success, "body 301"},
		{"unlisted 3xx fails", "/status/301", &probespec.HTTPCheck{Status: []int{200}}, results.Failure,
			"HTTP probe failed with statuscode: 301 (probed.io/expectStatus: [200])"},
		{"body matches", "/body/ok", &probespec.HTTPCheck{Body: re(`^ok$`)}, results.Success, "ok"},
		{"body mismatch", "/body/degraded", &probespec.HTTPCheck{Body: re(`^ok$`)}, results.Failure,
			`HTTP probe failed with statuscode: 200 (body does not match probed.io/expectBody "^ok$")`},
		{"body on a failing status keeps the kubelet's text", "/status/500", &probespec.HTTPCheck{Body: re(`body`)}, results.Failure,
			"HTTP probe failed with statuscode: 500"},
		{"body check on a 3xx", "/status/301", &probespec.HTTPCheck{Body: re(`^nothing$`)}, results.Failure,
			`HTTP probe failed with statuscode: 301 (body does not match probed.io/expectBody "^nothing$")`},
		{"body check passes a 3xx as a warning", "/status/301", &probespec.HTTPCheck{Body: re(`301`)}, results.Success,
			"Probe terminated redirects, Response body: body 301"},
		{"both", "/status/204", &probespec.HTTPCheck{Status: []int{204}, Body: re(`^$`)}, results.Success, ""},
		{"chunked body matches", "/chunked/ok", &probespec.HTTPCheck{Body: re(`^ok$`)}, results.Success, "ok"},
		{"chunked body mismatch", "/chunked/no", &probespec.HTTPCheck{Body: re(`^ok$`)}, results.Failure,
			`HTTP probe failed with statuscode: 200 (body does not match probed.io/expectBody "^ok$")`},
		{"only the first 10 KiB", "/big", &probespec.HTTPCheck{Body: re(`MARK`)}, results.Failure,
			`HTTP probe failed with statuscode: 200 (body does not match probed.io/expectBody "MARK")`},
		{"the first 10 KiB", "/big", &probespec.HTTPCheck{Body: re(`^a+$`)}, results.Success, big},
	}
	p := New(nil, Options{})
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var sink recordingSink
			target := Target{PodIP: "127.0.0.1", HTTPCheck: tc.check, Session: NewSession()}
			defer target.Session.Close()
			res, out, err := p.Probe(context.Background(), probespec.Readiness, httpSpec(tc.path, port), target, &sink)
			if err != nil {
				t.Fatalf("error: %v", err)
			}
			if res != tc.want || out != tc.wantOut {
				t.Fatalf("probe = %v, %.80q; want %v, %.80q", res, out, tc.want, tc.wantOut)
			}
			evs := sink.all()
			if tc.want == results.Failure {
				if len(evs) != 1 || evs[0].Message != "Readiness probe failed: "+tc.wantOut {
					t.Errorf("events = %q; want one Unhealthy with the failure", evs)
				}
			}
		})
	}
}
