package endpoints

import (
	"context"
	"net/http"
	"sync"
	"time"

	"golang.org/x/sync/semaphore"
	"k8s.io/klog/v2"
)

// What one caller, authenticated or not, may hold of the endpoints' server.
// The port is on the node's network: any pod, and anything that reaches the
// node, can open connections and send made-up tokens.
const (
	// DefaultMaxConnections caps open connections (a scraper or two, the
	// kubelet's probes and a port-forward need a handful); further ones wait
	// in the listen backlog until one closes.
	DefaultMaxConnections = 64
	// DefaultIdleTimeout closes a keep-alive connection idle this long.
	DefaultIdleTimeout = 90 * time.Second
	// readHeaderTimeout bounds the TLS handshake and the request head.
	readHeaderTimeout = 10 * time.Second
	// maxHeaderBytes bounds a request head: a bearer token is a few KiB.
	maxHeaderBytes = 64 << 10
	// DefaultMaxUnauthenticatedInFlight caps requests to /metrics and
	// /debug/ that are still being authenticated or authorized, that is,
	// waiting on a TokenReview or SubjectAccessReview; more are refused
	// with 429 at once. A token the API server already answered for is
	// decided from the cache and holds its place for microseconds.
	DefaultMaxUnauthenticatedInFlight = 16
)

// releaseKey carries, in a request's context, the release of its place
// under an unauthenticatedCap.
type releaseKey struct{}

// unauthenticatedCap counts the requests between its wrap and authorized
// (the handler after authorization), across every handler it wraps.
type unauthenticatedCap struct {
	places *semaphore.Weighted
	max    int64
}

func newUnauthenticatedCap(max int64) *unauthenticatedCap {
	return &unauthenticatedCap{places: semaphore.NewWeighted(max), max: max}
}

// wrap refuses a request with 429 when max requests already hold a place;
// the place is given back once the request is authorized, or when it ends,
// whichever is first.
func (c *unauthenticatedCap) wrap(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !c.places.TryAcquire(1) {
			klog.V(2).InfoS("Endpoint request refused: too many unauthenticated requests in flight", "path", r.URL.Path, "remote", r.RemoteAddr, "max", c.max)
			w.Header().Set("Retry-After", "1")
			http.Error(w, "Too many requests awaiting authentication; retry later", http.StatusTooManyRequests)
			return
		}
		release := sync.OnceFunc(func() { c.places.Release(1) })
		defer release()
		h.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), releaseKey{}, release)))
	})
}

// authorized gives back the request's place once it is authorized: what
// follows (a large /metrics answer, say) is an authorized caller's.
func authorized(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if release, ok := r.Context().Value(releaseKey{}).(func()); ok {
			release()
		}
		h.ServeHTTP(w, r)
	})
}
