package endpoints

import (
	"bufio"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"sync"
	"testing"
	"time"

	"k8s.io/apiserver/pkg/authentication/authenticator"
	"k8s.io/apiserver/pkg/authentication/request/bearertoken"
	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/apiserver/pkg/authorization/authorizer"
)

// slowAuth holds every token but "reader" in authentication until release
// is closed, as a TokenReview stuck behind the API server would; waiting
// says how many are held.
type slowAuth struct {
	release chan struct{}
	mu      sync.Mutex
	waiting int
}

func (s *slowAuth) held() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.waiting
}

func (s *slowAuth) auth() *Auth {
	tokens := authenticator.TokenFunc(func(ctx context.Context, token string) (*authenticator.Response, bool, error) {
		if token == "reader" {
			return &authenticator.Response{User: &user.DefaultInfo{Name: token}}, true, nil
		}
		s.mu.Lock()
		s.waiting++
		s.mu.Unlock()
		defer func() { s.mu.Lock(); s.waiting--; s.mu.Unlock() }()
		select {
		case <-s.release:
		case <-ctx.Done():
		}
		return nil, false, nil
	})
	return &Auth{
		Authenticator: bearertoken.New(tokens),
		Authorizer: authorizer.AuthorizerFunc(func(context.Context, authorizer.Attributes) (authorizer.Decision, string, error) {
			return authorizer.DecisionAllow, "", nil
		}),
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

// Requests still being authenticated are capped: past the cap, 429 at once
// with Retry-After, on every guarded path alike; an authorized request gives
// its place back before its handler runs, and places come back when the
// stuck ones end.
func TestUnauthenticatedInFlightCap(t *testing.T) {
	const max = 3
	slow := &slowAuth{release: make(chan struct{})}
	h, err := Handler(Options{Gatherer: testRegistry(), Auth: slow.auth(), MaxUnauthenticatedInFlight: max})
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for i := range max {
		wg.Add(1)
		go func() {
			defer wg.Done()
			path := []string{"/metrics", "/debug/probes"}[i%2]
			if code, body := getAs(t, h, path, "made-up-token"); code != http.StatusUnauthorized {
				t.Errorf("a made-up token once released: %d %q, want 401", code, body)
			}
		}()
	}
	waitFor(t, "the made-up tokens held in authentication", func() bool { return slow.held() == max })

	for _, path := range []string{"/metrics", "/debug/probes"} {
		rec := httptest.NewRecorder()
		req := httptest.NewRequest(http.MethodGet, path, nil)
		req.Header.Set("Authorization", "Bearer another-made-up-token")
		done := make(chan struct{})
		go func() { defer close(done); h.ServeHTTP(rec, req) }()
		waitFor(t, "the request past the cap answered, or held", func() bool {
			select {
			case <-done:
				return true
			default:
				return slow.held() > max
			}
		})
		if held := slow.held(); held > max {
			close(slow.release) // unblock everything before failing
			<-done
			wg.Wait()
			t.Fatalf("%s: a request past the cap of %d went on to authentication (%d held); want 429", path, max, held)
		}
		if rec.Code != http.StatusTooManyRequests || rec.Header().Get("Retry-After") == "" {
			t.Errorf("%s past the cap: %d (Retry-After %q), want 429 with Retry-After", path, rec.Code, rec.Header().Get("Retry-After"))
		}
	}
	// The open paths are not behind the cap.
	if code, _ := getAs(t, h, "/healthz", ""); code != http.StatusOK {
		t.Errorf("/healthz while the cap is full: %d", code)
	}

	close(slow.release)
	wg.Wait()
	// Authorized requests leave their place at once: more of them in a row
	// than the cap all pass.
	for i := range 2 * max {
		if code, body := getAs(t, h, "/metrics", "reader"); code != http.StatusOK {
			t.Fatalf("authorized scrape %d after the stuck ones ended: %d %q", i, code, body)
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
