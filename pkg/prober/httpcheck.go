package prober

import (
	"fmt"
	"net/http"
	"regexp"
	"slices"
)

// HTTPCheck is what an httpGet probe's response must look like to pass,
// beyond or instead of the kubelet's rule (the annotation's
// "probed.io/expectStatus" and "probed.io/expectBody"). A nil *HTTPCheck
// is the kubelet's rule alone.
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

// httpOutcome judges a response as the kubelet's DoHTTPProbe does, then
// applies check (which may be nil). body is at most MaxOutputBytes.
func httpOutcome(code int, body []byte, check *HTTPCheck) (Result, string) {
	if check == nil {
		return kubeletHTTPOutcome(code, body)
	}
	if len(check.Status) > 0 && !slices.Contains(check.Status, code) {
		// Which codes were wanted, never the body (kubernetes issue 99425).
		return Failure, fmt.Sprintf("HTTP probe failed with statuscode: %d (probed.io/expectStatus: %v)", code, check.Status)
	}
	if len(check.Status) == 0 && (code < http.StatusOK || code >= http.StatusBadRequest) {
		return kubeletHTTPOutcome(code, body)
	}
	if check.Body != nil && !check.Body.Match(body) {
		return Failure, fmt.Sprintf("HTTP probe failed with statuscode: %d (body does not match probed.io/expectBody %q)", code, check.Body.String())
	}
	if len(check.Status) > 0 {
		// An expected code passes as such, a 3xx included.
		return Success, string(body)
	}
	return kubeletHTTPOutcome(code, body)
}

// kubeletHTTPOutcome judges a response as the kubelet's DoHTTPProbe does.
func kubeletHTTPOutcome(code int, body []byte) (Result, string) {
	switch {
	case code >= http.StatusOK && code < http.StatusMultipleChoices:
		return Success, string(body)
	case code >= http.StatusMultipleChoices && code < http.StatusBadRequest:
		// Only a redirect we chose not to follow gets here.
		return Warning, fmt.Sprintf("Probe terminated redirects, Response body: %s", body)
	}
	// The body is deliberately left out of what users see (kubernetes issue 99425).
	return Failure, fmt.Sprintf("HTTP probe failed with statuscode: %d", code)
}
