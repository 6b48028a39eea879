package prober

import (
	"regexp"
	"slices"
)

// HTTPCheck is what an httpGet probe's response must look like to pass,
// beyond or instead of the kubelet's rule (the annotation's
// "probed.io/expectStatus" and "probed.io/expectBody"); httpOutcome applies
// it. A nil *HTTPCheck is the kubelet's rule alone.
type HTTPCheck struct {
	// Status lists the status codes that pass, replacing the kubelet's
	// 200–399; empty keeps that rule.
	Status []int
	// Body, when set, must match the first MaxOutputBytes of the body.
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
