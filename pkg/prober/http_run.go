package prober

import (
	"context"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"
)

// run carries out one httpGet probe: from the worker's template when it has
// one, by the fast path when the template allows, else (and whenever the
// fast path leaves the outcome open) through net/http as the kubelet does.
func (p *httpProber) run(ctx context.Context, action *v1.HTTPGetAction, target Target, userAgent string, timeout time.Duration) (Result, string, error) {
	t := target.Session.httpTemplate(action, target)
	if t == nil {
		var err error
		if t, err = buildHTTPTemplate(action, target, userAgent); err != nil {
			klog.V(4).InfoS("HTTP probe request could not be built", "err", err)
			return Unknown, "", err
		}
		target.Session.setHTTPTemplate(t)
	}
	if err := checkHost(ctx, t.hostname); err != nil {
		return Unknown, "", err
	}
	if v := klog.V(4); v.Enabled() {
		v.InfoS("HTTP probe", "url", t.url, "headers", action.HTTPHeaders, "timeout", timeout, "keepAlive", target.KeepAlive)
	}
	if t.fast && !p.noFast {
		start := time.Now()
		if res, out, err, ok := p.fastProbe(ctx, t, target.Session, timeout); ok {
			return res, out, err
		}
		// net/http gets only what is left of the probe's timeout, so a
		// fallback (a dial that timed out, a 3xx) never doubles it; a
		// spent budget still goes through net/http, for its wording.
		timeout = max(timeout-time.Since(start), time.Millisecond)
	}
	req, err := newHTTPRequest(ctx, action, target, userAgent)
	if err != nil {
		return Unknown, "", err
	}
	return p.probe(req, timeout)
}
