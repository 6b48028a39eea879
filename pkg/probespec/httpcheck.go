package probespec

import (
	"fmt"
	"regexp"
	"slices"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// The response checks of an httpGet probe: probed's own fields, beside
// core/v1 Probe's, that replace or tighten the kubelet's 200–399 rule.
const (
	// ExpectStatusField lists the status codes that pass, e.g. [200, 204].
	ExpectStatusField = "probed.io/expectStatus"
	// ExpectBodyField is an RE2 regexp the first 10 KiB of the body must match.
	ExpectBodyField = "probed.io/expectBody"
)

// The status codes expectStatus may list: every code HTTP defines a class for.
const (
	minStatusCode = 100
	maxStatusCode = 599
)

// HTTPCheck is what an httpGet probe's response must look like to pass,
// beyond or instead of the kubelet's rule (the annotation's
// "probed.io/expectStatus" and "probed.io/expectBody"); the prober's
// httpOutcome applies it. A nil *HTTPCheck is the kubelet's rule alone.
type HTTPCheck struct {
	// Status lists the status codes that pass, replacing the kubelet's
	// 200–399; empty keeps that rule.
	Status []int
	// Body, when set, must match the first 10 KiB of the body (the
	// prober's MaxOutputBytes).
	Body *regexp.Regexp
}

// Equal reports whether c and o check the same things.
func (c *HTTPCheck) Equal(o *HTTPCheck) bool {
	if c == nil || o == nil {
		return c == o
	}
	if !slices.Equal(c.Status, o.Status) || (c.Body == nil) != (o.Body == nil) {
		return false
	}
	return c.Body == nil || c.Body.String() == o.Body.String()
}

// checkHTTPCheck validates a probe's response checks (nil: absent) and
// compiles them; nil when neither is set.
func checkHTTPCheck(p *v1.Probe, status []int, body *string, path *field.Path) (*HTTPCheck, field.ErrorList) {
	if status == nil && body == nil {
		return nil, nil
	}
	var errs field.ErrorList
	if p.HTTPGet == nil {
		if status != nil {
			errs = append(errs, field.Invalid(path.Child(ExpectStatusField), status, "only httpGet probes can check the response status"))
		}
		if body != nil {
			errs = append(errs, field.Invalid(path.Child(ExpectBodyField), *body, "only httpGet probes can check the response body"))
		}
		return nil, errs
	}
	check := &HTTPCheck{}
	if status != nil {
		if len(status) == 0 {
			errs = append(errs, field.Required(path.Child(ExpectStatusField), "must list at least one status code"))
		}
		for i, code := range status {
			if code < minStatusCode || code > maxStatusCode {
				errs = append(errs, field.Invalid(path.Child(ExpectStatusField).Index(i), code, "must be an HTTP status code, between 100 and 599, inclusive"))
			}
		}
		check.Status = status
	}
	if body != nil {
		re, err := regexp.Compile(*body)
		if err != nil {
			errs = append(errs, field.Invalid(path.Child(ExpectBodyField), *body, "must be an RE2 regular expression: "+err.Error()))
		}
		// Whoever reads the pod's conditions learns whether the body matched:
		// a binary search reads the body out, a few probes per byte. So a body
		// check reads only what the pod itself answers on its own IP (a
		// redirect is followed to that same host only), never another host's
		// (docs/security.md, "Body checks").
		if host := p.HTTPGet.Host; host != "" {
			errs = append(errs, field.Forbidden(path.Child(ExpectBodyField), fmt.Sprintf(
				"a body check may read only the pod's own answers: not with httpGet.host %q (leave host empty: the probe then goes to the pod's IP)", host)))
		}
		check.Body = re
	}
	if len(errs) > 0 {
		return nil, errs
	}
	return check, nil
}
