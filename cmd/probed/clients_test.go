package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	authnv1 "k8s.io/api/authentication/v1"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/flowcontrol"

	"github.com/probed-dev/probed/pkg/endpoints"
)

// countingLimiter is the status client's rate limiter: it lets everything
// through and counts how often it was asked.
type countingLimiter struct {
	flowcontrol.RateLimiter
	asked atomic.Int64
}

func (c *countingLimiter) Wait(ctx context.Context) error { c.asked.Add(1); return nil }
func (c *countingLimiter) Accept()                        { c.asked.Add(1) }
func (c *countingLimiter) TryAccept() bool                { c.asked.Add(1); return true }

// reviewCounter is an API server that refuses every token, answers status
// patches, and counts requests by path and user agent.
type reviewCounter struct {
	mu   sync.Mutex
	seen map[string]int // "<path> <user agent>"
}

func (f *reviewCounter) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	f.seen[r.URL.Path+" "+r.UserAgent()]++
	f.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	switch {
	case r.URL.Path == "/apis/authentication.k8s.io/v1/tokenreviews":
		var tr authnv1.TokenReview
		_ = json.NewDecoder(r.Body).Decode(&tr)
		_ = json.NewEncoder(w).Encode(tr) // not authenticated
	case strings.HasSuffix(r.URL.Path, "/status") && r.Method == http.MethodPatch:
		_ = json.NewEncoder(w).Encode(&v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "ns"}})
	default:
		http.NotFound(w, r)
	}
}

func (f *reviewCounter) count(path, agent string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	n := 0
	for k, v := range f.seen {
		p, a, _ := strings.Cut(k, " ")
		if p == path && (agent == "" || a == agent) {
			n += v
		}
	}
	return n
}

// Made-up bearer tokens sent to /metrics, each costing a TokenReview, go
// through the review client alone: the status client's rate limiter is
// never asked for them, and a status patch afterwards is the one request it
// counts (issue 20: 32 such callers took a status patch from 3 ms to 1.65 s).
func TestMadeUpTokensDoNotTakeStatusWrites(t *testing.T) {
	t.Setenv("NODE_NAME", "node-a")
	api := &reviewCounter{seen: map[string]int{}}
	srv := httptest.NewServer(api)
	defer srv.Close()
	o := parse(t)
	statusLimiter := &countingLimiter{}
	cfg := &rest.Config{Host: srv.URL, UserAgent: "probed/test", QPS: float32(o.KubeAPIQPS), Burst: o.KubeAPIBurst, RateLimiter: statusLimiter}

	clients, err := newAPIClients(cfg, o)
	if err != nil {
		t.Fatal(err)
	}
	auth, err := endpointAuth(clients, o)
	if err != nil {
		t.Fatal(err)
	}
	h, err := endpoints.Handler(endpoints.Options{Auth: auth})
	if err != nil {
		t.Fatal(err)
	}
	// As many as may be reviewed at once: none is refused for capacity.
	const callers = endpoints.DefaultMaxReviewsInFlight
	var wg sync.WaitGroup
	for i := range callers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rec := httptest.NewRecorder()
			req := httptest.NewRequest(http.MethodGet, "/metrics", nil)
			req.Header.Set("Authorization", fmt.Sprintf("Bearer made-up-%d", i))
			h.ServeHTTP(rec, req)
			if rec.Code != http.StatusUnauthorized {
				t.Errorf("made-up token %d: %d, want 401", i, rec.Code)
			}
		}()
	}
	wg.Wait()

	reviews := api.count("/apis/authentication.k8s.io/v1/tokenreviews", "")
	if reviews < callers {
		t.Fatalf("%d TokenReviews for %d made-up tokens; the test needs one each", reviews, callers)
	}
	if byReviewClient := api.count("/apis/authentication.k8s.io/v1/tokenreviews", "probed/test (endpoint-auth)"); byReviewClient != reviews {
		t.Errorf("%d of %d TokenReviews came from the review client; the rest shared the status writes' client", byReviewClient, reviews)
	}
	if n := statusLimiter.asked.Load(); n != 0 {
		t.Errorf("the status client's rate limiter was asked %d times for the reviews; want 0", n)
	}

	if _, err := clients.status.CoreV1().Pods("ns").Patch(context.Background(), "web", types.StrategicMergePatchType,
		[]byte(`{"status":{}}`), metav1.PatchOptions{}, "status"); err != nil {
		t.Fatal(err)
	}
	if n := statusLimiter.asked.Load(); n != 1 {
		t.Errorf("the status client's rate limiter was asked %d times for one patch; want 1", n)
	}
	if n := api.count("/api/v1/namespaces/ns/pods/web/status", "probed/test"); n != 1 {
		t.Errorf("status patches from the status client: %d, want 1", n)
	}
}

// The review client's limits are its own flags, validated like the others.
func TestAuthReviewLimits(t *testing.T) {
	t.Setenv("NODE_NAME", "node-a")
	o := parse(t, "--auth-review-qps=2", "--auth-review-burst=3")
	if err := o.validate(); err != nil {
		t.Fatal(err)
	}
	cfg := &rest.Config{Host: "https://127.0.0.1:1", QPS: 20, Burst: 40, UserAgent: "probed/x"}
	rc := reviewConfig(cfg, o)
	if rc.QPS != 2 || rc.Burst != 3 || rc.RateLimiter != nil || rc.UserAgent != "probed/x (endpoint-auth)" {
		t.Errorf("review config QPS %v burst %d limiter %v agent %q", rc.QPS, rc.Burst, rc.RateLimiter, rc.UserAgent)
	}
	if cfg.QPS != 20 || cfg.UserAgent != "probed/x" {
		t.Errorf("the status client's config changed: %v %q", cfg.QPS, cfg.UserAgent)
	}
	// The flag refuses it when parsed; validate refuses it in options built otherwise.
	if err := parseError("--auth-review-burst=0"); err == nil || !strings.Contains(err.Error(), "must be at least 1") {
		t.Errorf("--auth-review-burst=0 parsed: %v", err)
	}
	o.AuthReviewBurst = 0
	if err := o.validate(); err == nil || !strings.Contains(err.Error(), "--auth-review-qps") {
		t.Errorf("AuthReviewBurst 0: %v", err)
	}
}
