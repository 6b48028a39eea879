package endpoints

import (
	"bufio"
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	authnv1 "k8s.io/api/authentication/v1"
	authzv1 "k8s.io/api/authorization/v1"
	"k8s.io/client-go/rest"

	"github.com/probed-dev/probed/pkg/worker"
)

// heldAPIServer is an API server whose reviews of strangers hang until
// release is closed, as reviews stuck behind a loaded API server would.
// The token "scraper" is probed's audience's and may get every path; tokens
// "user-<n>" are valid but their SubjectAccessReviews hang; every other
// token's TokenReview hangs, then fails.
type heldAPIServer struct {
	release chan struct{}
	mu      sync.Mutex
	held    map[string]int // reviews hanging, by kind: "token" or "access"
}

func (f *heldAPIServer) hold(ctx context.Context, kind string) {
	f.mu.Lock()
	f.held[kind]++
	f.mu.Unlock()
	defer func() { f.mu.Lock(); f.held[kind]--; f.mu.Unlock() }()
	select {
	case <-f.release:
	case <-ctx.Done():
	}
}

func (f *heldAPIServer) holding(kind string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.held[kind]
}

func (f *heldAPIServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	switch r.URL.Path {
	case "/apis/authentication.k8s.io/v1/tokenreviews":
		var tr authnv1.TokenReview
		_ = json.NewDecoder(r.Body).Decode(&tr)
		switch tok := tr.Spec.Token; {
		case tok == "scraper" || strings.HasPrefix(tok, "user-"):
			tr.Status = authnv1.TokenReviewStatus{Authenticated: true, Audiences: tr.Spec.Audiences, User: authnv1.UserInfo{Username: tok}}
		default:
			f.hold(r.Context(), "token")
		}
		_ = json.NewEncoder(w).Encode(tr)
	case "/apis/authorization.k8s.io/v1/subjectaccessreviews":
		var sar authzv1.SubjectAccessReview
		_ = json.NewDecoder(r.Body).Decode(&sar)
		if sar.Spec.User != "scraper" {
			f.hold(r.Context(), "access")
		}
		sar.Status.Allowed = sar.Spec.User == "scraper"
		_ = json.NewEncoder(w).Encode(sar)
	default:
		http.NotFound(w, r)
	}
}

// waitFor polls cond until it holds or 10 s pass.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// Reviews in flight are capped, TokenReviews and SubjectAccessReviews each
// on their own: a caller that needs one more gets 429 at once, with
// Retry-After, on every guarded path alike. A scraper whose token and
// access the API server already answered is decided from the caches and
// gets 200 however many strangers wait (issue 30: it got 429 while 16
// made-up tokens were under review). Places come back when the stuck
// reviews end.
func TestReviewCapSparesKnownCallers(t *testing.T) {
	const max = 3
	api := &heldAPIServer{release: make(chan struct{}), held: map[string]int{}}
	srv := httptest.NewServer(api)
	defer srv.Close()
	var wg sync.WaitGroup
	defer wg.Wait()
	released := false
	release := func() {
		if !released {
			released = true
			close(api.release)
		}
	}
	defer release()
	auth, err := DelegatedAuth(&rest.Config{Host: srv.URL}, AuthOptions{Audiences: []string{DefaultAudience}, MaxTokenReviews: max, MaxAccessReviews: max})
	if err != nil {
		t.Fatal(err)
	}
	h, err := Handler(Options{Gatherer: testRegistry(), Auth: &auth, Probes: func() []worker.Snapshot { return nil }})
	if err != nil {
		t.Fatal(err)
	}
	// The scraper, once: its token and access are now cached.
	if code, body := getAs(t, h, "/metrics", "scraper"); code != http.StatusOK {
		t.Fatalf("first scrape: %d %q", code, body)
	}

	// Valid users without a grant, their access reviews hanging; then
	// made-up tokens, their token reviews hanging.
	for i := range max {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if code, body := getAs(t, h, "/metrics", fmt.Sprintf("user-%d", i)); code != http.StatusForbidden {
				t.Errorf("a user without the grant once released: %d %q, want 403", code, body)
			}
		}()
	}
	waitFor(t, "the access reviews held", func() bool { return api.holding("access") == max })
	if code, _ := getAs(t, h, "/metrics", "user-other"); code != http.StatusTooManyRequests || api.holding("access") > max {
		t.Errorf("another user while %d access reviews hang: %d (%d held), want 429 and no review", max, code, api.holding("access"))
	}
	for i := range max {
		wg.Add(1)
		go func() {
			defer wg.Done()
			path := []string{"/metrics", "/debug/probes"}[i%2]
			if code, body := getAs(t, h, path, fmt.Sprintf("made-up-%d", i)); code != http.StatusUnauthorized {
				t.Errorf("a made-up token once released: %d %q, want 401", code, body)
			}
		}()
	}
	waitFor(t, "the reviews held", func() bool { return api.holding("token") == max && api.holding("access") == max })

	for _, path := range []string{"/metrics", "/debug/probes"} {
		code, _ := getAs(t, h, path, "another-made-up-token")
		if code != http.StatusTooManyRequests || api.holding("token") > max {
			t.Errorf("%s with another made-up token while %d token reviews hang: %d (%d held), want 429 and no review", path, max, code, api.holding("token"))
		}
	}
	rec := httptest.NewRecorder()
	req := httptest.NewRequest(http.MethodGet, "/metrics", nil)
	req.Header.Set("Authorization", "Bearer yet-another")
	h.ServeHTTP(rec, req)
	if rec.Code != http.StatusTooManyRequests || rec.Header().Get("Retry-After") == "" || rec.Header().Get("Connection") != "close" {
		t.Errorf("past the cap: %d, Retry-After %q, Connection %q; want 429 with Retry-After, closing", rec.Code, rec.Header().Get("Retry-After"), rec.Header().Get("Connection"))
	}
	// The known scraper is not behind them.
	for i := range 2 * max {
		if code, body := getAs(t, h, "/metrics", "scraper"); code != http.StatusOK {
			t.Fatalf("cached scraper, request %d, while the reviews hang: %d %q, want 200", i, code, body)
		}
	}
	if code, _ := getAs(t, h, "/healthz", ""); code != http.StatusOK {
		t.Errorf("/healthz while the reviews hang: %d", code)
	}

	release()
	wg.Wait()
	waitFor(t, "the reviews ended", func() bool { return api.holding("token") == 0 && api.holding("access") == 0 })
	// Places are back: new strangers are reviewed (401), not refused (429).
	for i := range 2 * max {
		if code, _ := getAs(t, h, "/metrics", fmt.Sprintf("later-%d", i)); code != http.StatusUnauthorized {
			t.Fatalf("made-up token %d after the stuck ones ended: %d, want 401", i, code)
		}
	}
}

// A keep-alive connection left idle is closed by the server after its idle
// timeout (it stayed open for ever before).
func TestIdleConnectionClosed(t *testing.T) {
	addr := serve(t, Options{Gatherer: testRegistry(), Insecure: true, IdleTimeout: 100 * time.Millisecond})
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := io.WriteString(conn, "GET /healthz HTTP/1.1\r\nHost: probed\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	br := bufio.NewReader(conn)
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatal(err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || resp.Close {
		t.Fatalf("keep-alive /healthz: %d, close=%v", resp.StatusCode, resp.Close)
	}
	// Now idle: the server must hang up well before this deadline.
	_ = conn.SetReadDeadline(time.Now().Add(10 * time.Second))
	_, err = br.ReadByte()
	if errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatal("an idle keep-alive connection was still open after 10s")
	}
	if !errors.Is(err, io.EOF) {
		t.Fatalf("reading an idle connection: %v, want EOF (closed by the server)", err)
	}
}

// Connections past the limit wait in the backlog: a request on one is
// answered only once another connection closes.
func TestConnectionLimit(t *testing.T) {
	addr := serve(t, Options{Gatherer: testRegistry(), Insecure: true, MaxConnections: 2})
	var open []net.Conn
	for range 2 {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		open = append(open, c)
	}
	// Both accepted: each answers a request and stays open.
	for _, c := range open {
		if _, err := io.WriteString(c, "GET /healthz HTTP/1.1\r\nHost: probed\r\n\r\n"); err != nil {
			t.Fatal(err)
		}
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
	}
	third, err := net.Dial("tcp", addr) // the kernel's backlog takes it
	if err != nil {
		t.Fatal(err)
	}
	defer third.Close()
	if _, err := io.WriteString(third, "GET /healthz HTTP/1.1\r\nHost: probed\r\nConnection: close\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	br := bufio.NewReader(third)
	_ = third.SetReadDeadline(time.Now().Add(300 * time.Millisecond))
	if _, err := br.ReadByte(); !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("a third connection over a limit of 2 was served: %v", err)
	}
	open[0].Close()
	_ = third.SetReadDeadline(time.Now().Add(10 * time.Second))
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatalf("the waiting connection once another closed: %v", err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Errorf("the waiting connection got %d", resp.StatusCode)
	}
}

// fromSource is an HTTPS client whose connections come from the loopback
// address src, with timeout.
func fromSource(src string, timeout time.Duration) *http.Client {
	d := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(src)}}
	return &http.Client{Timeout: timeout, Transport: &http.Transport{DialContext: d.DialContext,
		TLSClientConfig: &tls.Config{InsecureSkipVerify: true}, DisableKeepAlives: true}}
}

// issue 30: 64 idle sockets from one pod, reopened as they closed, made 3 of
// 3 /healthz probes with a 1 s timeout fail, so the kubelet restarted
// probed. Now the kubelet's probes go to a loopback listener of their own,
// and one source holds at most MaxConnectionsPerSource of the main port's
// connections (the rest are closed at once), so other callers still get in.
func TestIdleSocketsStarveNothing(t *testing.T) {
	main, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	health, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		// Silent sockets are held for 30 s, longer than the test: the
		// attacker's never time out while it runs.
		done <- ServeListeners(ctx, main, health, Options{Gatherer: testRegistry(), Auth: fakeAuth(&asked{}),
			Cert: ServingCert{Hosts: []string{"node-a"}}, ReadHeaderTimeout: 30 * time.Second})
	}()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("ServeListeners: %v", err)
		}
	}()
	waitFor(t, "the server", func() bool {
		resp, err := fromSource("127.0.0.1", time.Second).Get("https://" + main.Addr().String() + "/healthz")
		if err == nil {
			resp.Body.Close()
		}
		return err == nil
	})

	// The attacker: 64 sockets from 127.0.0.2 that send nothing, each
	// opened again 100 ms after the server closes it (the reopened
	// them every 10 s; faster only tests the kernel's backlog).
	stop := make(chan struct{})
	var attackers sync.WaitGroup
	var refused atomic.Int64
	defer func() { close(stop); attackers.Wait() }()
	attacker := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP("127.0.0.2")}}
	for range DefaultMaxConnections {
		attackers.Add(1)
		go func() {
			defer attackers.Done()
			for {
				c, err := attacker.Dial("tcp", main.Addr().String())
				if err == nil {
					go func() { <-stop; c.Close() }()
					opened := time.Now()
					_, _ = c.Read(make([]byte, 1)) // until the server closes it
					c.Close()
					if time.Since(opened) < time.Second {
						refused.Add(1)
					}
				}
				select {
				case <-stop:
					return
				case <-time.After(100 * time.Millisecond):
				}
			}
		}()
	}
	waitFor(t, "the server to close the sockets past the per-source cap", func() bool {
		return refused.Load() >= DefaultMaxConnections-DefaultMaxConnectionsPerSource
	})
	// The kubelet's three probes, with its default timeout of 1 s, on the
	// health listener; and three callers from another address on the main
	// port (3 s: a handshake under -race on a loaded machine).
	for i := range 3 {
		for what, url := range map[string]string{
			"health listener": "http://" + health.Addr().String() + "/healthz",
			"main port":       "https://" + main.Addr().String() + "/healthz",
		} {
			client := map[string]*http.Client{"health listener": fromSource("127.0.0.1", time.Second), "main port": fromSource("127.0.0.3", 3*time.Second)}[what]
			resp, err := client.Get(url)
			if err != nil {
				t.Fatalf("/healthz %d on the %s while 64 idle sockets from one address are kept open: %v", i, what, err)
			}
			resp.Body.Close()
			if resp.StatusCode != http.StatusOK {
				t.Errorf("/healthz %d on the %s: %d", i, what, resp.StatusCode)
			}
		}
	}
	// The health listener serves nothing guarded, and no reasons.
	for path, want := range map[string]int{"/metrics": 404, "/debug/probes": 404, "/readyz": 200} {
		resp, err := fromSource("127.0.0.1", 5*time.Second).Get("http://" + health.Addr().String() + path)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != want {
			t.Errorf("health listener %s: %d, want %d", path, resp.StatusCode, want)
		}
	}
}

// A socket that never starts its TLS handshake is closed after
// ReadHeaderTimeout.
func TestSilentSocketClosed(t *testing.T) {
	addr := serve(t, Options{Gatherer: testRegistry(), Auth: fakeAuth(&asked{}), Cert: ServingCert{Hosts: []string{"node-a"}},
		ReadHeaderTimeout: 100 * time.Millisecond})
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
	if _, err := c.Read(make([]byte, 1)); errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatal("a silent socket was still open after 10 s")
	}
}

// A health address must be a loopback one: it serves plain HTTP.
func TestHealthAddrLoopbackOnly(t *testing.T) {
	err := Serve(context.Background(), Options{Addr: "127.0.0.1:0", HealthAddr: "0.0.0.0:0", Gatherer: testRegistry(), Insecure: true})
	if err == nil || !strings.Contains(err.Error(), "not a loopback address") {
		t.Errorf("Serve with HealthAddr 0.0.0.0:0: %v, want it refused", err)
	}
}
