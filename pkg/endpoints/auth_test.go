package endpoints

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"

	authnv1 "k8s.io/api/authentication/v1"
	authzv1 "k8s.io/api/authorization/v1"

	"github.com/probed-dev/probed/pkg/worker"
)

// asked records what the fake authorizer was asked.
type asked struct {
	mu    sync.Mutex
	attrs []Attributes
}

func (a *asked) add(x Attributes) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.attrs = append(a.attrs, x)
}

// authenticatorFunc and authorizerFunc make fakes of functions.
type authenticatorFunc func(*http.Request) (*UserInfo, bool, error)

func (f authenticatorFunc) AuthenticateRequest(r *http.Request) (*UserInfo, bool, error) { return f(r) }

type authorizerFunc func(context.Context, Attributes) (bool, string, error)

func (f authorizerFunc) Authorize(ctx context.Context, a Attributes) (bool, string, error) {
	return f(ctx, a)
}

// fakeAuth knows two tokens: "reader" may get every path, "nobody" none.
func fakeAuth(log *asked) *Auth {
	return &Auth{
		Authenticator: authenticatorFunc(func(r *http.Request) (*UserInfo, bool, error) {
			token, _ := bearerToken(r.Header.Get("Authorization"))
			switch token {
			case "reader", "nobody":
				return &UserInfo{Name: token}, true, nil
			case "broken":
				return nil, false, errors.New("the API server did not answer")
			}
			return nil, false, nil
		}),
		Authorizer: authorizerFunc(func(_ context.Context, a Attributes) (bool, string, error) {
			log.add(a)
			return a.User.Name == "reader", "no grant", nil
		}),
	}
}

func getAs(t *testing.T, h http.Handler, path, token string) (int, string) {
	t.Helper()
	rec := httptest.NewRecorder()
	req := httptest.NewRequest(http.MethodGet, path, nil)
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	h.ServeHTTP(rec, req)
	return rec.Code, rec.Body.String()
}

// /metrics and everything under /debug/ need an authenticated caller that
// the authorizer lets get the path; /healthz and /readyz need nothing.
func TestGuardedPaths(t *testing.T) {
	log := &asked{}
	h, err := Handler(Options{
		Gatherer: testRegistry(),
		Auth:     fakeAuth(log),
		Probes:   func() []worker.Snapshot { return []worker.Snapshot{{PodNamespace: "ns", PodName: "p"}} },
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		path, token string
		code        int
		body        string
	}{
		{"/healthz", "", 200, "ok"},
		{"/readyz", "", 200, ""},
		{"/healthz", "garbage", 200, "ok"},
		{"/metrics", "", 401, "Unauthorized"},
		{"/metrics", "garbage", 401, "Unauthorized"},
		{"/metrics", "broken", 401, "Unauthorized"},
		{"/metrics", "nobody", 403, `User \"nobody\" cannot get path \"/metrics\"`},
		{"/metrics", "reader", 200, "probed_test_total 1"},
		{"/debug/probes", "", 401, "Unauthorized"},
		{"/debug/probes", "nobody", 403, `cannot get path \"/debug/probes\"`},
		{"/debug/probes", "reader", 200, `"podName": "p"`},
		{"/debug/probes?namespace=ns", "nobody", 403, `cannot get path \"/debug/probes\"`},
		{"/debug/other", "", 401, "Unauthorized"},
		{"/debug/other", "reader", 404, ""},
	} {
		code, body := getAs(t, h, tc.path, tc.token)
		if code != tc.code || !strings.Contains(body, tc.body) {
			t.Errorf("GET %s with token %q = %d %q, want %d with %q", tc.path, tc.token, code, body, tc.code, tc.body)
		}
	}
	// The authorizer saw non-resource requests for the path, verb get.
	log.mu.Lock()
	defer log.mu.Unlock()
	if len(log.attrs) == 0 {
		t.Fatal("the authorizer was never asked")
	}
	for _, a := range log.attrs {
		if a.Verb != "get" || (a.Path != "/metrics" && !strings.HasPrefix(a.Path, "/debug/")) {
			t.Errorf("authorizer asked verb=%q path=%q", a.Verb, a.Path)
		}
	}
}

// fakeAPIServer answers TokenReviews (one known token) and
// SubjectAccessReviews (get /metrics only), and counts them.
type fakeAPIServer struct {
	mu        sync.Mutex
	reviews   map[string]int
	sar       authzv1.SubjectAccessReviewSpec
	audiences []string
}

func (f *fakeAPIServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	defer f.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	switch r.URL.Path {
	case "/apis/authentication.k8s.io/v1/tokenreviews":
		var tr authnv1.TokenReview
		_ = json.NewDecoder(r.Body).Decode(&tr)
		f.reviews["token"]++
		f.audiences = tr.Spec.Audiences
		// As kube-apiserver: a token is valid for the audiences it was
		// issued for; a review that names none asks for the API server's.
		issuedFor := map[string]string{"scraper-token": DefaultAudience, "api-token": "https://kubernetes.default.svc"}[tr.Spec.Token]
		asked := tr.Spec.Audiences
		if len(asked) == 0 {
			asked = []string{"https://kubernetes.default.svc"}
		}
		if issuedFor != "" && slices.Contains(asked, issuedFor) {
			tr.Status = authnv1.TokenReviewStatus{Authenticated: true, Audiences: []string{issuedFor},
				User: authnv1.UserInfo{Username: "system:serviceaccount:monitoring:prometheus", Groups: []string{"system:serviceaccounts"}}}
		}
		_ = json.NewEncoder(w).Encode(tr)
	case "/apis/authorization.k8s.io/v1/subjectaccessreviews":
		var sar authzv1.SubjectAccessReview
		_ = json.NewDecoder(r.Body).Decode(&sar)
		f.reviews["access"]++
		f.sar = sar.Spec
		sar.Status.Allowed = sar.Spec.NonResourceAttributes != nil && sar.Spec.NonResourceAttributes.Path == "/metrics"
		_ = json.NewEncoder(w).Encode(sar)
	default:
		http.NotFound(w, r)
	}
}

// DelegatedAuth sends a TokenReview and a SubjectAccessReview for the
// non-resource path, and caches both answers: a second scrape asks nothing.
// (The integration tier runs the same against a real kube-apiserver.)
func TestDelegatedAuthReviewsAndCaches(t *testing.T) {
	api := &fakeAPIServer{reviews: map[string]int{}}
	h := authHandler(t, api, AuthOptions{})
	for i := range 3 {
		if code, body := getAs(t, h, "/metrics", "scraper-token"); code != 200 {
			t.Fatalf("scrape %d: %d %q", i, code, body)
		}
	}
	api.mu.Lock()
	if api.reviews["token"] != 1 || api.reviews["access"] != 1 {
		t.Errorf("3 scrapes made %d TokenReviews and %d SubjectAccessReviews, want 1 each (cached)", api.reviews["token"], api.reviews["access"])
	}
	if !slices.Equal(api.audiences, []string{DefaultAudience}) {
		t.Errorf("TokenReview spec.audiences = %q, want [%s]", api.audiences, DefaultAudience)
	}
	if sar := api.sar; sar.User != "system:serviceaccount:monitoring:prometheus" || sar.NonResourceAttributes == nil ||
		sar.NonResourceAttributes.Verb != "get" || sar.ResourceAttributes != nil {
		t.Errorf("SubjectAccessReview spec %+v, want the scraper's user, verb get on a non-resource path", sar)
	}
	api.mu.Unlock()
	if code, _ := getAs(t, h, "/debug/probes", "scraper-token"); code != 403 {
		t.Errorf("/debug/probes without its grant: %d, want 403", code)
	}
	if code, _ := getAs(t, h, "/metrics", "other-token"); code != 401 {
		t.Errorf("/metrics with a token the API server does not know: %d, want 401", code)
	}
}

// A token issued for the API server (an operator's, or one made without
// --audience) is refused on every guarded path: probed accepts only tokens
// issued for its own audience. /metrics may accept API server tokens too
// (a PodMonitor's Secret), and then still accepts probed's own.
func TestDelegatedAuthAudiences(t *testing.T) {
	for _, apiTokensOnMetrics := range []bool{false, true} {
		h := authHandler(t, &fakeAPIServer{reviews: map[string]int{}}, AuthOptions{MetricsAPIServerTokens: apiTokensOnMetrics})
		metricsWithAPIToken := http.StatusUnauthorized
		if apiTokensOnMetrics {
			metricsWithAPIToken = http.StatusOK
		}
		for _, tc := range []struct {
			path, token string
			code        int
		}{
			{"/metrics", "scraper-token", http.StatusOK},
			{"/metrics", "api-token", metricsWithAPIToken},
			{"/debug/probes", "api-token", http.StatusUnauthorized},
			{"/readyz?verbose", "api-token", http.StatusUnauthorized},
		} {
			if code, body := getAs(t, h, tc.path, tc.token); code != tc.code {
				t.Errorf("API server tokens on /metrics %v: %s with %s: %d %q, want %d", apiTokensOnMetrics, tc.path, tc.token, code, body, tc.code)
			}
		}
	}
}
