package prober

import (
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"sync"
	"time"

	utilnet "k8s.io/apimachinery/pkg/util/net"
	"k8s.io/klog/v2"
)

// maxRedirects is how many requests one probe may make, as in Go's and the
// kubelet's redirect policy: the 10th redirect in a row is refused.
const maxRedirects = 10

// httpProber runs httpGet probes. Its transport is built once and shared by
// all probes: keep-alives are off, so sharing costs no connection reuse, and
// probes then allocate no transport of their own.
type httpProber struct {
	transport *http.Transport
	// fastDialer dials the fast path's connections (see http_fast.go).
	fastDialer *net.Dialer
	// noFast turns the fast path off (tests and benchmarks compare the two).
	noFast bool

	// clients holds one immutable *http.Client per probe timeout. The
	// client's own Timeout (not a context deadline) is what the kubelet uses,
	// and its error texts ("Client.Timeout exceeded ...") reach users in
	// events. Timeouts are whole seconds, so the map stays tiny.
	mu      sync.RWMutex
	clients map[time.Duration]*http.Client
}

// newHTTPProber returns the HTTP prober; guard (which may be nil) checks
// every connection, and every redirect.
func newHTTPProber(guard *HostGuard) *httpProber {
	t := &http.Transport{
		// Probes target pods that mostly serve self-signed certificates.
		TLSClientConfig:   &tls.Config{InsecureSkipVerify: true}, //nolint:gosec // kubelet parity
		DisableKeepAlives: true,
		// Never go through the node's HTTP_PROXY: pods are reached directly.
		// A non-nil func also stops SetTransportDefaults from installing one.
		Proxy: http.ProxyURL(nil),
		// Without this Go adds Accept-Encoding: gzip, which the kubelet does not send.
		DisableCompression: true,
		DialContext:        newGuardedDialer(guard).DialContext,
	}
	// The kubelet's defaults: TLS handshake and idle timeouts, and HTTP/2 over
	// TLS when the pod offers it.
	return &httpProber{
		transport:  utilnet.SetTransportDefaults(t),
		fastDialer: newFINDialer(guard),
		clients:    map[time.Duration]*http.Client{},
	}
}

// client returns the shared client for a timeout.
func (p *httpProber) client(timeout time.Duration) *http.Client {
	p.mu.RLock()
	c, ok := p.clients[timeout]
	p.mu.RUnlock()
	if ok {
		return c
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if c, ok := p.clients[timeout]; ok {
		return c
	}
	c = &http.Client{
		Timeout:       timeout,
		Transport:     p.transport,
		CheckRedirect: checkRedirect,
	}
	p.clients[timeout] = c
	return c
}

// checkRedirect applies the kubelet's sameHostRedirects, then refuses a
// followed redirect to an address the host policy refuses. A redirect to a
// name is judged when it is dialed, by the addresses the name resolves to.
func checkRedirect(req *http.Request, via []*http.Request) error {
	// A redirect to another host is never followed (the kubelet's Warning),
	// so it sends nothing anywhere and needs no policy check.
	if err := sameHostRedirects(req, via); err != nil {
		return err
	}
	if err := checkHost(req.Context(), req.URL.Hostname()); err != nil {
		return fmt.Errorf("redirect refused: %w", err)
	}
	return nil
}

// sameHostRedirects follows redirects to the probed host only (any port), so
// that a probe cannot be bounced to some other machine. A redirect elsewhere
// ends the probe with the redirect response itself, which then becomes a
// Warning. It keeps no state: the via chain is per request.
func sameHostRedirects(req *http.Request, via []*http.Request) error {
	if req.URL.Hostname() != via[0].URL.Hostname() {
		return http.ErrUseLastResponse
	}
	if len(via) >= maxRedirects {
		return errors.New("stopped after 10 redirects")
	}
	return nil
}

// probe sends req and judges the response as the kubelet's DoHTTPProbe does.
// Transport errors, timeouts included, are a Failure carrying the error text
// and a nil error; only a failure to read the body, and a connection or
// redirect the host policy refuses, are errors.
func (p *httpProber) probe(req *http.Request, timeout time.Duration) (Result, string, error) {
	resp, err := p.client(timeout).Do(req)
	if err != nil {
		if isRefused(err) {
			return Unknown, "", err
		}
		return Failure, err.Error(), nil
	}
	defer func() { _ = resp.Body.Close() }()

	body, truncated, err := readAtMost(resp.Body, MaxOutputBytes)
	if err != nil {
		return Failure, "", err
	}
	code := resp.StatusCode
	if v := klog.V(4); v.Enabled() {
		v.InfoS("HTTP probe response", "url", req.URL, "status", code, "truncated", truncated, "body", string(body))
	}
	res, out := httpOutcome(code, body)
	return res, out, nil
}

// httpOutcome judges a response as the kubelet's DoHTTPProbe does.
func httpOutcome(code int, body []byte) (Result, string) {
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

// readAtMost reads up to limit bytes. Reaching the limit is not an error:
// the output is simply truncated.
func readAtMost(r io.Reader, limit int64) (data []byte, truncated bool, err error) {
	lr := &io.LimitedReader{R: r, N: limit}
	data, err = io.ReadAll(lr)
	return data, lr.N <= 0, err
}
