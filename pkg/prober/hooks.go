package prober

import (
	"context"
	"net"
	"net/http"

	v1 "k8s.io/api/core/v1"

	"github.com/probed-dev/probed/pkg/hostpolicy"
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
// "kube-lifecycle/1.37".
func NewHTTPGetRequest(ctx context.Context, action *v1.HTTPGetAction, target Target, userAgent string) (*http.Request, error) {
	return newHTTPRequest(ctx, action, target, userAgent)
}

// GuardedDialer returns a dialer for connections made for target's pod: it
// checks every address it connects to against g right before connect(2),
// the pod's own IPs always allowed; a refused address gets nothing sent and
// a *RefusedError. A nil or kubelet-policy guard checks nothing. Unlike the
// probes' dialer it sets no SO_LINGER: it is the plain dialer the kubelet's
// lifecycle client uses, plus the check.
func GuardedDialer(g *hostpolicy.Guard, target Target) *net.Dialer {
	d := scopeOf(g, target).dialer(false)
	d.KeepAlive = 0
	return d
}

// RedirectPolicy is an http.Client's CheckRedirect for requests made for
// target's pod, with the probes' rule, which is the kubelet's for lifecycle
// hooks too (RedirectChecker(false)): follow redirects to the same host
// only, at most 10, and never to an address g refuses.
func RedirectPolicy(g *hostpolicy.Guard, target Target) func(req *http.Request, via []*http.Request) error {
	return scopeOf(g, target).redirectPolicy
}
