package prober

import (
	"context"
	"net"
	"net/http"
	"syscall"

	v1 "k8s.io/api/core/v1"
)

// This file exports the pieces of an httpGet probe that a container's
// httpGet lifecycle hook shares with it (pkg/lifecycle): the kubelet builds
// both requests with the same function and follows redirects by the same
// rule, and probed's host policy applies to every connection either makes.

// NewHTTPGetRequest builds the GET request of an httpGet action as the
// kubelet's NewRequestForHTTPGetAction does: the scheme (http by default),
// the host (target.PodIP by default), the port resolved against
// target.Ports, the path, the user's headers, and the default User-Agent
// and Accept. userAgent is the whole User-Agent value, e.g.
// "kube-lifecycle/1.34".
func NewHTTPGetRequest(ctx context.Context, action *v1.HTTPGetAction, target Target, userAgent string) (*http.Request, error) {
	return newHTTPRequest(ctx, action, target, userAgent)
}

// WithHostScope returns ctx carrying what GuardedDialer and CheckRedirect
// need to judge a connection made for target's pod: the guard and the pod's
// IPs (always allowed). Without it an active guard refuses every connection.
func WithHostScope(ctx context.Context, g *HostGuard, target Target) context.Context {
	return withDialScope(ctx, g, target)
}

// GuardedDialer returns a dialer that checks every address it connects to
// against g, with the scope WithHostScope put in the dial's context, right
// before connect(2); a refused address gets nothing sent and a
// *RefusedError. A nil or kubelet-policy guard checks nothing. Unlike the
// probes' dialer it sets no SO_LINGER: it is the plain dialer the kubelet's
// lifecycle client uses, plus the check.
func GuardedDialer(g *HostGuard) *net.Dialer {
	d := &net.Dialer{}
	if g.active() {
		d.ControlContext = func(ctx context.Context, _, address string, _ syscall.RawConn) error {
			return checkDialAddr(ctx, g, address)
		}
	}
	return d
}

// CheckRedirect is an http.Client's CheckRedirect with the probes' rule,
// which is the kubelet's for lifecycle hooks too (RedirectChecker(false)):
// follow redirects to the same host only, at most 10, and never to an
// address the host policy refuses.
func CheckRedirect(req *http.Request, via []*http.Request) error {
	return checkRedirect(req, via)
}

// IsRefused reports whether err, however wrapped, is a host policy refusal.
func IsRefused(err error) bool { return isRefused(err) }
