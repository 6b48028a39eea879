package endpoints

import (
	"errors"
	"time"

	"golang.org/x/sync/semaphore"
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

// tryAcquire takes a place if one is free; release gives it back.
func (c *reviewCap) tryAcquire() bool { return c.places.TryAcquire(1) }

func (c *reviewCap) release() { c.places.Release(1) }
