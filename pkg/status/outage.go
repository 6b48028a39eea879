package status

import (
	"errors"
	"maps"
	"slices"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
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

// outageGate is the writer-wide backoff. Guarded by Writer.mu. While it is
// active, one pod, the probe, is queued for notBefore; a pod the queue hands
// out before then is held, out of the queue, until a write succeeds.
type outageGate struct {
	failures  int
	notBefore time.Time
	// probe is the pod queued to try the API server at notBefore; "" when
	// none is.
	probe types.UID
	held  map[types.UID]struct{}
}

func (g *outageGate) active() bool { return g.failures > 0 }

// closed reports whether writes must wait.
func (g *outageGate) closed(now time.Time) bool {
	return g.active() && now.Before(g.notBefore)
}

// fail records a failed probe by uid and returns how long every pod waits;
// uid probes again then.
func (g *outageGate) fail(now time.Time, uid types.UID) time.Duration {
	d := outageBaseDelay << min(g.failures, 10)
	d = min(d, outageMaxDelay)
	g.failures++
	g.notBefore = now.Add(d)
	g.probe = uid
	delete(g.held, uid)
	return d
}

// hold keeps a pod back while the gate is closed. It reports whether the pod
// is to be queued for notBefore as the probe, there being none.
func (g *outageGate) hold(uid types.UID) bool {
	switch g.probe {
	case "":
		g.probe = uid
		return true
	case uid:
		return false // already queued for notBefore
	}
	if g.held == nil {
		g.held = map[types.UID]struct{}{}
	}
	g.held[uid] = struct{}{}
	return false
}

// unhold notes that a pod is being synced.
func (g *outageGate) unhold(uid types.UID) { delete(g.held, uid) }

// forget drops a pod that is gone.
func (g *outageGate) forget(uid types.UID) { delete(g.held, uid) }

// handOn is called when uid left the queue without failing the gate again
// (gone, written meanwhile, or a failure of its own). When uid was the probe
// of an active gate, a held pod becomes the probe: handOn returns it, to be
// queued for notBefore.
func (g *outageGate) handOn(uid types.UID) (types.UID, bool) {
	if !g.active() || g.probe != uid {
		return "", false
	}
	g.probe = ""
	if len(g.held) == 0 {
		return "", false
	}
	next := slices.Min(slices.Collect(maps.Keys(g.held)))
	delete(g.held, next)
	g.probe = next
	return next, true
}

// reset opens the gate and returns the held pods, in UID order, to be
// queued again.
func (g *outageGate) reset() []types.UID {
	held := slices.Sorted(maps.Keys(g.held))
	*g = outageGate{}
	return held
}

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
