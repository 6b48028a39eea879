package endpoints

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	authnv1 "k8s.io/api/authentication/v1"
	authzv1 "k8s.io/api/authorization/v1"
	"k8s.io/client-go/rest"
	"k8s.io/klog/v2"
)

// scriptedAPIServer answers reviews by functions of the request, and
// counts them.
type scriptedAPIServer struct {
	tokens   func(n int, tr *authnv1.TokenReview) int // HTTP status; 200 encodes tr
	accesses func(sar *authzv1.SubjectAccessReview)
	nTokens  atomic.Int32
	mu       sync.Mutex
	sars     []authzv1.SubjectAccessReviewSpec
}

func (f *scriptedAPIServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	switch r.URL.Path {
	case "/apis/authentication.k8s.io/v1/tokenreviews":
		var tr authnv1.TokenReview
		_ = json.NewDecoder(r.Body).Decode(&tr)
		if code := f.tokens(int(f.nTokens.Add(1)), &tr); code != http.StatusOK {
			w.WriteHeader(code)
			_, _ = fmt.Fprintf(w, `{"kind":"Status","apiVersion":"v1","status":"Failure","code":%d}`, code)
			return
		}
		_ = json.NewEncoder(w).Encode(tr)
	case "/apis/authorization.k8s.io/v1/subjectaccessreviews":
		var sar authzv1.SubjectAccessReview
		_ = json.NewDecoder(r.Body).Decode(&sar)
		f.mu.Lock()
		f.sars = append(f.sars, sar.Spec)
		f.mu.Unlock()
		f.accesses(&sar)
		_ = json.NewEncoder(w).Encode(sar)
	default:
		http.NotFound(w, r)
	}
}

// authHandler serves the endpoints behind DelegatedAuth against api.
func authHandler(t *testing.T, api http.Handler, o AuthOptions) http.Handler {
	t.Helper()
	srv := httptest.NewServer(api)
	t.Cleanup(srv.Close)
	if o.Audiences == nil {
		o.Audiences = []string{DefaultAudience}
	}
	auth, err := DelegatedAuth(&rest.Config{Host: srv.URL}, o)
	if err != nil {
		t.Fatal(err)
	}
	h, err := Handler(Options{Gatherer: testRegistry(), Auth: &auth})
	if err != nil {
		t.Fatal(err)
	}
	return h
}

func authenticated(user authnv1.UserInfo, audiences ...string) authnv1.TokenReviewStatus {
	return authnv1.TokenReviewStatus{Authenticated: true, User: user, Audiences: audiences}
}

// A TokenReview that authenticates the token for an audience probed did
// not ask for is no user: a token for another service is refused even if
// the API server says who it is.
func TestTokenForAnotherAudienceRefused(t *testing.T) {
	h := authHandler(t, &scriptedAPIServer{
		tokens: func(_ int, tr *authnv1.TokenReview) int {
			tr.Status = authenticated(authnv1.UserInfo{Username: "someone"}, "vault")
			return 200
		},
		accesses: func(sar *authzv1.SubjectAccessReview) { sar.Status.Allowed = true },
	}, AuthOptions{})
	if code, body := getAs(t, h, "/metrics", "vault-token"); code != http.StatusUnauthorized {
		t.Errorf("a token authenticated for another audience: %d %q, want 401", code, body)
	}
}

// The SubjectAccessReview names the caller as the TokenReview did, its
// groups with system:authenticated, its extra, and the request's verb in
// lower case on the non-resource path; a refusal's reason reaches the
// caller, with the request's text HTML-escaped, as the API server's.
func TestAccessReviewNamesTheCaller(t *testing.T) {
	api := &scriptedAPIServer{
		tokens: func(_ int, tr *authnv1.TokenReview) int {
			tr.Status = authenticated(authnv1.UserInfo{Username: "alice", UID: "u-1", Groups: []string{"team"},
				Extra: map[string]authnv1.ExtraValue{"scopes": {"metrics"}}}, DefaultAudience)
			return 200
		},
		accesses: func(sar *authzv1.SubjectAccessReview) {
			sar.Status.Allowed = sar.Spec.NonResourceAttributes.Path == "/metrics"
			sar.Status.Reason = "RBAC: no rule"
		},
	}
	h := authHandler(t, api, AuthOptions{})
	if code, body := getAs(t, h, "/metrics", "alice-token"); code != http.StatusOK {
		t.Fatalf("/metrics: %d %q", code, body)
	}
	code, body := getAs(t, h, "/debug/<b>", "alice-token")
	if code != http.StatusForbidden || !strings.Contains(body, `User \"alice\" cannot get path \"/debug/\u0026lt;b\u0026gt;\": RBAC: no rule`) {
		t.Errorf("/debug/<b>: %d %q, want 403 naming the user, the escaped path and the reason", code, body)
	}
	api.mu.Lock()
	defer api.mu.Unlock()
	s := api.sars[0]
	if s.User != "alice" || s.UID != "u-1" || !slices.Equal(s.Groups, []string{"team", "system:authenticated"}) ||
		!slices.Equal(s.Extra["scopes"], authzv1.ExtraValue{"metrics"}) || s.NonResourceAttributes.Verb != "get" {
		t.Errorf("SubjectAccessReview spec %+v", s)
	}
}

// An API server that fails is asked again: a transient answer (500, 429)
// is retried within the review, and a review that failed is not cached,
// so the next request after an outage is reviewed afresh. Callers of one
// token at once share one review.
func TestTokenReviewRetriesAndNeverCachesErrors(t *testing.T) {
	var down atomic.Bool
	api := &scriptedAPIServer{
		tokens: func(n int, tr *authnv1.TokenReview) int {
			switch {
			case down.Load():
				return http.StatusForbidden // not transient: fails at once
			case n == 2:
				return http.StatusInternalServerError
			case n == 3:
				return http.StatusTooManyRequests
			}
			tr.Status = authenticated(authnv1.UserInfo{Username: tr.Spec.Token}, DefaultAudience)
			return 200
		},
		accesses: func(sar *authzv1.SubjectAccessReview) { sar.Status.Allowed = true },
	}
	h := authHandler(t, api, AuthOptions{})
	down.Store(true)
	if code, _ := getAs(t, h, "/metrics", "a"); code != http.StatusUnauthorized {
		t.Fatalf("while the API server refuses reviews: %d, want 401", code)
	}
	down.Store(false)
	if code, body := getAs(t, h, "/metrics", "a"); code != http.StatusOK {
		t.Fatalf("after the API server is back: %d %q, want 200 (the failure was cached?)", code, body)
	}
	if n := api.nTokens.Load(); n != 4 {
		t.Errorf("%d TokenReviews, want 4: one refused, then a 500 and a 429 retried before the answer", n)
	}
	// Eight callers of a new token at once: one review between them.
	before := api.nTokens.Load()
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			if code, _ := getAs(t, h, "/metrics", "b"); code != http.StatusOK {
				t.Errorf("shared review: %d", code)
			}
		})
	}
	wg.Wait()
	if n := api.nTokens.Load() - before; n != 1 {
		t.Errorf("8 callers of one token made %d TokenReviews, want 1", n)
	}
}

// Only "Bearer <token>" (the scheme in any case) is a bearer token.
func TestBearerToken(t *testing.T) {
	for header, want := range map[string]string{
		"Bearer abc": "abc", "bearer abc": "abc", "  BEARER abc  ": "abc", "Bearer abc extra": "abc",
		"": "", "Bearer": "", "Bearer ": "", "Basic abc": "", "Bearerabc": "",
	} {
		if got, ok := bearerToken(header); got != want || ok != (want != "") {
			t.Errorf("bearerToken(%q) = %q, %v; want %q", header, got, ok, want)
		}
	}
}

// Anyone who reaches the port can send made-up tokens: at the default
// verbosity their refusals cost no log lines (k8s.io/apiserver's filter
// logged an error for each, a way to fill the node's disk).
func TestMadeUpTokensAreNotLogged(t *testing.T) {
	var buf syncBuffer
	klog.LogToStderr(false)
	klog.SetOutput(&buf)
	defer func() { klog.SetOutput(io.Discard); klog.LogToStderr(true) }()
	h := authHandler(t, &fakeAPIServer{reviews: map[string]int{}}, AuthOptions{})
	for i := range 20 {
		if code, _ := getAs(t, h, "/metrics", fmt.Sprintf("made-up-%d", i)); code != http.StatusUnauthorized {
			t.Fatalf("made-up token: %d, want 401", code)
		}
	}
	klog.Flush()
	if n := strings.Count(buf.String(), "\n"); n > 0 {
		t.Errorf("20 made-up tokens logged %d lines, want none:\n%s", n, buf.String())
	}
}

type syncBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}
