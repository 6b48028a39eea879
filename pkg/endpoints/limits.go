package endpoints

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"sync/atomic"
	"time"

	"golang.org/x/sync/semaphore"
	"k8s.io/apiserver/pkg/authentication/authenticator"
	"k8s.io/klog/v2"
)

// What one caller, authenticated or not, may hold of the endpoints' server.
// The port is on the node's network: any pod, and anything that reaches the
// node, can open connections and send made-up tokens.
const (
	// DefaultMaxConnections caps open connections (a scraper or two and
	// the plugin's port-forwards need a handful); further ones wait in the
	// listen backlog until one closes.
	DefaultMaxConnections = 64
	// DefaultMaxConnectionsPerSource caps one remote address's open
	// connections; more are closed at once. One pod's sockets then cannot
	// fill DefaultMaxConnections.
	DefaultMaxConnectionsPerSource = 8
	// DefaultIdleTimeout closes a keep-alive connection idle this long: a
	// scraper reconnects at its next scrape for the cost of a handshake.
	DefaultIdleTimeout = 30 * time.Second
	// DefaultReadHeaderTimeout bounds the TLS handshake and the request
	// head: both take milliseconds, and a socket that sends nothing is
	// closed after it.
	DefaultReadHeaderTimeout = 5 * time.Second
	// maxHeaderBytes bounds a request head: a bearer token is a few KiB.
	maxHeaderBytes = 64 << 10
	// DefaultMaxReviewsInFlight caps the TokenReviews in flight, and apart
	// from them the SubjectAccessReviews; a caller that needs one more is
	// refused with 429 at once. A caller the API server already answered
	// for is decided from the cache and never counts.
	DefaultMaxReviewsInFlight = 16
)

// errReviewsBusy: every place for a review of this kind is taken.
var errReviewsBusy = errors.New("too many reviews in flight")

// reviewCap counts reviews in flight, of one kind.
type reviewCap struct {
	places *semaphore.Weighted
	max    int
}

func newReviewCap(max int) *reviewCap {
	return &reviewCap{places: semaphore.NewWeighted(int64(max)), max: max}
}

// wrapToken holds a place while t reviews a token; none free is
// errReviewsBusy. It goes behind the token cache, so only misses count.
func (c *reviewCap) wrapToken(t authenticator.Token) authenticator.Token {
	return authenticator.TokenFunc(func(ctx context.Context, token string) (*authenticator.Response, bool, error) {
		if !c.places.TryAcquire(1) {
			return nil, false, errReviewsBusy
		}
		defer c.places.Release(1)
		return t.AuthenticateToken(ctx, token)
	})
}

// wrapTransport holds a place for each SubjectAccessReview sent through
// rt; none free is errReviewsBusy, and the request's reviewState says so.
// The authorizer sends one only when its cache has no answer.
func (c *reviewCap) wrapTransport(rt http.RoundTripper) http.RoundTripper {
	return roundTripperFunc(func(r *http.Request) (*http.Response, error) {
		if r.Method != http.MethodPost || !strings.HasSuffix(r.URL.Path, "/subjectaccessreviews") {
			return rt.RoundTrip(r)
		}
		if !c.places.TryAcquire(1) {
			markReviewsBusy(r.Context())
			return nil, errReviewsBusy
		}
		defer c.places.Release(1)
		return rt.RoundTrip(r)
	})
}

type roundTripperFunc func(*http.Request) (*http.Response, error)

func (f roundTripperFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// reviewStateKey carries a request's *atomic.Bool: set when a review it
// needed found no free place.
type reviewStateKey struct{}

func withReviewState(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), reviewStateKey{}, new(atomic.Bool))))
	})
}

func markReviewsBusy(ctx context.Context) {
	if b, ok := ctx.Value(reviewStateKey{}).(*atomic.Bool); ok {
		b.Store(true)
	}
}

func reviewsBusy(ctx context.Context) bool {
	b, ok := ctx.Value(reviewStateKey{}).(*atomic.Bool)
	return ok && b.Load()
}

// busyAware turns errReviewsBusy into a plain refusal marked on the
// request (the token cache answers in a context of its own, so the mark is
// made here), keeping it out of the authentication filter's error log.
type busyAware struct{ authenticator.Request }

func (b busyAware) AuthenticateRequest(r *http.Request) (*authenticator.Response, bool, error) {
	resp, ok, err := b.Request.AuthenticateRequest(r)
	if errors.Is(err, errReviewsBusy) {
		markReviewsBusy(r.Context())
		return nil, false, nil
	}
	return resp, ok, err
}

func tooManyReviews(w http.ResponseWriter, r *http.Request) {
	klog.V(4).InfoS("Endpoint request refused: too many reviews in flight", "path", r.URL.Path, "remote", r.RemoteAddr)
	w.Header().Set("Retry-After", "1")
	http.Error(w, "Too many requests awaiting authentication; retry later", http.StatusTooManyRequests)
}
