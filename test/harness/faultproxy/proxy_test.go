package faultproxy

import (
	"bufio"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// upstream is a TLS server that answers reads with "ok" and watches with one
// event line every 10 ms.
func upstream(t *testing.T) (*httptest.Server, []byte) {
	t.Helper()
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Query().Get("watch") != "true" {
			fmt.Fprint(w, "ok "+r.Header.Get("Authorization"))
			return
		}
		w.Header().Set("Content-Type", "application/json")
		for i := 0; ; i++ {
			if _, err := fmt.Fprintf(w, `{"type":"ADDED","object":{"n":%d}}`+"\n", i); err != nil {
				return
			}
			w.(http.Flusher).Flush()
			select {
			case <-r.Context().Done():
				return
			case <-time.After(10 * time.Millisecond):
			}
		}
	}))
	srv.EnableHTTP2 = true
	srv.StartTLS()
	t.Cleanup(srv.Close)
	ca := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw})
	return srv, ca
}

func start(t *testing.T) (*Proxy, *http.Client) {
	t.Helper()
	up, ca := upstream(t)
	p, err := Start(Options{Upstream: up.URL, UpstreamCAPEM: ca})
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(p.CAPEM)
	tr := &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}, ForceAttemptHTTP2: true}
	t.Cleanup(func() { tr.CloseIdleConnections(); _ = p.Close() })
	return p, &http.Client{Transport: tr, Timeout: 10 * time.Second}
}

func get(t *testing.T, c *http.Client, url string) (int, http.Header, string) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, url, nil)
	req.Header.Set("Authorization", "Bearer tok")
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header, string(b)
}

func TestForwardsWithTokenAndInjectsShareOfFaults(t *testing.T) {
	p, c := start(t)
	if code, _, body := get(t, c, p.URL+"/api/v1/pods"); code != 200 || body != "ok Bearer tok" {
		t.Fatalf("forwarded read = %d %q", code, body)
	}
	p.SetFaults(Fault{Classes: Read, Code: 429, RetryAfter: 2, Share: 0.5})
	var codes []int
	for i := 0; i < 4; i++ {
		code, h, body := get(t, c, p.URL+"/api/v1/pods")
		codes = append(codes, code)
		if code == 429 && (h.Get("Retry-After") != "2" || !strings.Contains(body, `"reason":"TooManyRequests"`)) {
			t.Errorf("429 without Retry-After or Status body: %v %s", h, body)
		}
	}
	if fmt.Sprint(codes) != "[200 429 200 429]" {
		t.Errorf("codes with share 0.5 = %v", codes)
	}
	p.SetFaults()
	if code, _, _ := get(t, c, p.URL+"/api/v1/pods"); code != 200 {
		t.Errorf("after clearing faults: %d", code)
	}
	if st := p.Stats(); st.Injected != 2 || st.PodLists != 6 || st.Reads != 6 {
		t.Errorf("stats = %+v", st)
	}
}

func TestCutWatches(t *testing.T) {
	for _, tc := range []struct {
		mode CutMode
		last string // the last line the client reads, or "" for an error
	}{
		{CutExpired, string(expiredEvent)},
		{CutReset, ""},
	} {
		p, c := start(t)
		resp, err := c.Get(p.URL + "/api/v1/pods?watch=true")
		if err != nil {
			t.Fatal(err)
		}
		br := bufio.NewReader(resp.Body)
		if _, err := br.ReadString('\n'); err != nil {
			t.Fatalf("first event: %v", err)
		}
		for p.CutWatches(tc.mode) != 1 {
			time.Sleep(5 * time.Millisecond) // the first event may precede registration's visibility
		}
		var last string
		var readErr error
		for {
			line, err := br.ReadString('\n')
			if err != nil {
				readErr = err
				break
			}
			last = line
		}
		resp.Body.Close()
		switch {
		case tc.last != "" && last != tc.last:
			t.Errorf("mode %d: last line %q, want %q", tc.mode, last, tc.last)
		case tc.last != "" && readErr != io.EOF:
			t.Errorf("mode %d: stream ended with %v, want a clean end", tc.mode, readErr)
		case tc.last == "" && readErr == io.EOF:
			t.Errorf("mode %d: stream ended cleanly, want an abort", tc.mode)
		}
		if st := p.Stats(); st.WatchesCut != 1 || st.Watches != 1 {
			t.Errorf("mode %d: stats %+v", tc.mode, st)
		}
	}
}
