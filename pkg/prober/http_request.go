package prober

import (
	"context"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	v1 "k8s.io/api/core/v1"
)

// newHTTPRequest builds the GET request of an httpGet probe exactly as the
// kubelet's NewRequestForHTTPGetAction does, so that applications see the
// same URL, Host and headers whichever of the two probes them.
func newHTTPRequest(ctx context.Context, action *v1.HTTPGetAction, target Target, userAgent string) (*http.Request, error) {
	scheme := strings.ToLower(string(action.Scheme))
	if scheme == "" {
		scheme = "http"
	}
	host := action.Host
	if host == "" {
		host = target.PodIP
	}
	port, err := resolvePort(action.Port, target.Ports)
	if err != nil {
		return nil, err
	}
	u := probeURL(scheme, host, port, action.Path)
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return nil, err
	}
	req.Header = probeHeaders(action.HTTPHeaders, userAgent)
	// An explicit Host header names the virtual host; Go only honours it
	// through req.Host. Empty means "the URL's host".
	req.Host = req.Header.Get("Host")
	return req, nil
}

// probeURL joins the parts of a probe target. The path may carry a query;
// a path that does not parse is kept verbatim rather than rejected, which
// is the kubelet's legacy behaviour. IPv6 hosts get their brackets here.
func probeURL(scheme, host string, port int, path string) *url.URL {
	u, err := url.Parse(path)
	if err != nil {
		u = &url.URL{Path: path}
	}
	u.Scheme = scheme
	u.Host = net.JoinHostPort(host, strconv.Itoa(port))
	return u
}

// probeHeaders returns the user's headers, canonicalised and multi-valued,
// plus the kubelet's defaults. A default is only added when the user did not
// name that header at all; naming it with an empty value suppresses it
// (Go's client sends no User-Agent when it is set to "", and an empty
// Accept is removed here).
func probeHeaders(list []v1.HTTPHeader, userAgent string) http.Header {
	h := make(http.Header, len(list)+2)
	for _, kv := range list {
		h.Add(kv.Name, kv.Value)
	}
	if _, ok := h["User-Agent"]; !ok {
		h.Set("User-Agent", userAgent)
	}
	if _, ok := h["Accept"]; !ok {
		h.Set("Accept", "*/*")
	} else if h.Get("Accept") == "" {
		h.Del("Accept")
	}
	return h
}
