package status

import (
	"errors"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
)

// While the API server as a whole is unavailable (down, unreachable,
// throttling or failing every request), backing off each pod on its own would
// either hammer it with one request per pod or, with long per-pod backoffs,
// leave pods unwritten long after it recovers. Instead the writer backs off
// once, for every pod, and probes with a single pod; the first success
// releases every pending pod at once.
const (
	outageBaseDelay = 250 * time.Millisecond
	// outageMaxDelay bounds how long after recovery the first probe comes.
	outageMaxDelay = 2 * time.Second
)

// outageGate is the writer-wide backoff. Guarded by Writer.mu.
type outageGate struct {
	failures  int
	notBefore time.Time
}

func (g *outageGate) active() bool { return g.failures > 0 }

func (g *outageGate) fail(now time.Time) time.Duration {
	d := outageBaseDelay << min(g.failures, 10)
	d = min(d, outageMaxDelay)
	g.failures++
	g.notBefore = now.Add(d)
	return d
}

func (g *outageGate) reset() { *g = outageGate{} }

// apiUnavailable tells an error of the API server as a whole from one about
// a single pod (invalid, forbidden, conflict), which only that pod backs off for.
func apiUnavailable(err error) bool {
	if err == nil {
		return false
	}
	var status apierrors.APIStatus
	if !errors.As(err, &status) {
		return true // no answer: refused, reset, TLS, client-side timeout
	}
	code := status.Status().Code
	return code == 429 || code >= 500 || apierrors.IsServerTimeout(err) || apierrors.IsTimeout(err)
}
