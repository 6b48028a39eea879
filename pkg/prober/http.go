package prober

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	v1 "k8s.io/api/core/v1"
	utilnet "k8s.io/apimachinery/pkg/util/net"
	"k8s.io/klog/v2"

	"github.com/probed-dev/probed/pkg/hostpolicy"
	"github.com/probed-dev/probed/pkg/probespec"
)

// An httpGet probe, top to bottom, as the kubelet's pkg/probe/http runs it:
// the request is built as NewRequestForHTTPGetAction builds it; one GET goes
// through net/http's Client, on a Transport configured as the kubelet's
// (keep-alives off, no proxy, no compression, TLS without verification,
// apimachinery's SetTransportDefaults; for protocol HTTP2, its h2c
// Transport), following redirects by the kubelet's rule; the body is read
// up to 10 KiB and judged as DoHTTPProbe judges it.
//
// What probed adds: the host policy, in the dialer and on redirects
// (dialer.go); the opt-in response checks (HTTPCheck) and
// keep-alive; transport errors that do not quote the response
// (withholdResponseBytes); and a redirect warning that quotes the body
// only of the pod's own answer (redirectBodyWithheld).

// httpProber runs httpGet probes.
type httpProber struct {
	userAgent *UserAgent
	guard     *hostpolicy.Guard
	// transport and h2c serve every probe whose connections the host
	// policy does not scope to its pod (--probe-host-policy=kubelet) and
	// that keeps no connection: one Transport for all, as in the kubelet.
	// Other probes use their worker's own (see transportFor).
	transport, h2c *http.Transport
	// tls builds the Config of a probe with probed.io/tls.
	tls *tlsSource
}

func newHTTPProber(userAgent *UserAgent, guard *hostpolicy.Guard, tlsSrc *tlsSource) *httpProber {
	return &httpProber{
		userAgent: userAgent,
		guard:     guard,
		transport: newTransport(scope{}, false, false, nil),
		h2c:       newTransport(scope{}, true, false, nil),
		tls:       tlsSrc,
	}
}

// newTransport returns a Transport configured as the kubelet's probe
// Transport (or, with h2c, as its h2c Transport: HTTP/2 over cleartext
// with prior knowledge, nothing else), dialing through s, except that it
// reads at most MaxResponseHeaderBytes of an answer's head. keepAlive keeps
// the connection between probes ("probed.io/keepAlive"). A non-nil
// tlsCfg replaces the kubelet's unverified TLS ("probed.io/tls").
func newTransport(s scope, h2c, keepAlive bool, tlsCfg *tls.Config) *http.Transport {
	dial := s.dial(true)
	if h2c {
		t := &http.Transport{
			DisableKeepAlives:      !keepAlive,
			Proxy:                  http.ProxyURL(nil),
			DisableCompression:     true,
			DialContext:            dial,
			Protocols:              new(http.Protocols),
			MaxResponseHeaderBytes: MaxResponseHeaderBytes,
		}
		t.Protocols.SetUnencryptedHTTP2(true)
		return t
	}
	// SetTransportDefaults adds the kubelet's TLS handshake and idle
	// timeouts and HTTP/2 over TLS when the pod offers it; a non-nil Proxy
	// stops it from installing the node's.
	if tlsCfg == nil {
		// Probes target pods that mostly serve self-signed certificates.
		tlsCfg = &tls.Config{InsecureSkipVerify: true} //nolint:gosec // kubelet parity
	} else {
		tlsCfg = tlsCfg.Clone() // the Transport adds its ALPN protocols
	}
	return utilnet.SetTransportDefaults(&http.Transport{
		TLSClientConfig:    tlsCfg,
		DisableKeepAlives:  !keepAlive,
		Proxy:              http.ProxyURL(nil),
		DisableCompression: true, // no Accept-Encoding: gzip, which the kubelet does not send
		DialContext:        dial,
		// Also the HTTP/2 header list probed advertises.
		MaxResponseHeaderBytes: MaxResponseHeaderBytes,
	})
}

// run carries out one httpGet probe.
func (p *httpProber) run(ctx context.Context, action *v1.HTTPGetAction, target Target, timeout time.Duration) (Result, string, error) {
	req, err := newHTTPRequest(ctx, action, target, p.userAgent.Probe())
	if err != nil {
		klog.V(4).InfoS("HTTP probe request could not be built", "err", err)
		return Unknown, "", err
	}
	sc := scopeOf(p.guard, target)
	if err := sc.checkHost(req.URL.Hostname()); err != nil {
		return Unknown, "", err
	}
	h2c := action.Protocol != nil && *action.Protocol == v1.HTTPProtocolHTTP2
	if _, named := req.Header["Connection"]; target.KeepAlive && !named {
		// What earlier releases sent: an HTTP/1.0-minded server then keeps
		// the connection too. HTTP/2 drops the header.
		req.Header.Set("Connection", "keep-alive")
	}
	if v := klog.V(4); v.Enabled() {
		v.InfoS("HTTP probe", "url", req.URL.String(), "headers", action.HTTPHeaders, "timeout", timeout, "h2c", h2c, "keepAlive", target.KeepAlive)
	}
	tlsCfg, _, err := p.tls.config(target)
	if err != nil {
		return Unknown, "", err
	}
	t := p.transportFor(sc, h2c, target, tlsCfg)
	defer target.Session.releaseHTTP(t)
	c := &http.Client{Timeout: timeout, Transport: t, CheckRedirect: sc.redirectPolicy}
	res, out, err := p.send(c, req, target.HTTPCheck)
	if res == Warning && action.Host != "" {
		// A redirect to another host, answered by a host that is not the
		// pod's own IP: its body is published where a body check could not
		// read it (docs/security.md, "Body checks read only the pod's own
		// answers").
		out = redirectBodyWithheld
	}
	return res, out, err
}

// redirectBodyWithheld is a redirect warning's text, as the kubelet's, for
// a probe with a host: the body is left out.
const redirectBodyWithheld = "Probe terminated redirects, Response body: " + withheld

// transportFor returns the Transport of one probe: the shared one, unless
// the host policy binds the probe's dialer to its pod or the probe keeps
// its connection; then its worker's own, which the worker's Session keeps
// between probes (without a Session, one for this probe alone).
func (p *httpProber) transportFor(sc scope, h2c bool, target Target, tlsCfg *tls.Config) *http.Transport {
	switch {
	case sc.active() || target.KeepAlive || tlsCfg != nil:
		return target.Session.httpTransport(sc, h2c, target.KeepAlive, tlsCfg)
	case h2c:
		return p.h2c
	}
	return p.transport
}

// send sends req with c and judges the response as the kubelet's
// DoHTTPProbe does, then applies check (nil: none). Transport errors,
// timeouts included, are a Failure carrying the error text and a nil
// error; only a failure to read the body, and a connection or redirect the
// host policy refuses, are errors.
func (p *httpProber) send(c *http.Client, req *http.Request, check *probespec.HTTPCheck) (Result, string, error) {
	start := time.Now()
	resp, err := c.Do(req)
	if err != nil {
		if hostpolicy.IsRefused(err) {
			return Unknown, "", err
		}
		return Failure, nameHeaderLimit(withholdResponseBytes(err)), nil
	}
	defer func() { _ = resp.Body.Close() }()
	if resp.StatusCode == http.StatusSwitchingProtocols {
		// The body of a 101 is the connection itself, which net/http leaves
		// out of Client.Timeout and the request's context: the kubelet
		// would read it for ever. It gets the timeout and a second.
		cut := time.AfterFunc(time.Until(start.Add(c.Timeout+switchingGrace)), func() { _ = resp.Body.Close() })
		defer cut.Stop()
	}

	body, truncated, err := readAtMost(resp.Body, MaxOutputBytes)
	if err != nil {
		if text := withholdResponseBytes(err); text != err.Error() {
			err = errors.New(text)
		}
		return Failure, "", err
	}
	if v := klog.V(4); v.Enabled() {
		v.InfoS("HTTP probe response", "url", req.URL, "status", resp.StatusCode, "proto", resp.Proto, "truncated", truncated, "body", string(body))
	}
	res, out := httpOutcome(resp.StatusCode, body, check)
	return res, out, nil
}

// readAtMost reads up to limit bytes. Reaching the limit is not an error:
// the output is simply truncated.
func readAtMost(r io.Reader, limit int64) (data []byte, truncated bool, err error) {
	lr := &io.LimitedReader{R: r, N: limit}
	data, err = io.ReadAll(lr)
	return data, lr.N <= 0, err
}

// httpOutcome judges a response as the kubelet's DoHTTPProbe does, then
// applies check (which may be nil). body is at most MaxOutputBytes.
func httpOutcome(code int, body []byte, check *probespec.HTTPCheck) (Result, string) {
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

// nameHeaderLimit adds MaxResponseHeaderBytes to net/http's HTTP/2 texts
// for a head over it, which do not say how large a head may be; its
// HTTP/1 text does ("server response headers exceeded 32768 bytes").
func nameHeaderLimit(text string) string {
	if strings.HasSuffix(text, "response header list larger than advertised limit") || strings.HasSuffix(text, "header list too large") {
		return fmt.Sprintf("%s (%d bytes)", text, MaxResponseHeaderBytes)
	}
	return text
}

// switchingGrace is how long past its timeout a probe reads the body of a
// 101 Switching Protocols answer.
const switchingGrace = time.Second

// withheld stands in for the response bytes a transport error quoted.
const withheld = `"<withheld>"`

// withholdResponseBytes returns err's text, in the kubelet's shape, with
// what net/http quoted of the response replaced by withheld: every Go-quoted
// string after the request's `Get "URL": ` (a malformed status or header
// line, a bad Content-Length or transfer coding, a Location that does not
// parse, an HTTP/2 GOAWAY's debug data). The kubelet publishes these texts
// in events as they are; probed also writes them into pod conditions, and a
// header line can carry a secret of whatever the probe reached (issue 20).
// The URL stays: it is the probe's own, or a same-host redirect's.
func withholdResponseBytes(err error) string {
	text := err.Error()
	start := 0
	var ue *url.Error
	if errors.As(err, &ue) {
		if prefix := ue.Op + " " + strconv.Quote(ue.URL) + ": "; strings.HasPrefix(text, prefix) {
			start = len(prefix)
		}
	}
	rest := text[start:]
	if !strings.Contains(rest, `"`) {
		return text
	}
	var b strings.Builder
	b.WriteString(text[:start])
	for {
		i := strings.IndexByte(rest, '"')
		if i < 0 {
			b.WriteString(rest)
			return b.String()
		}
		b.WriteString(rest[:i])
		q, qerr := strconv.QuotedPrefix(rest[i:])
		if qerr != nil {
			b.WriteByte('"')
			rest = rest[i+1:]
			continue
		}
		b.WriteString(withheld)
		rest = rest[i+len(q):]
	}
}

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

// httpTransport returns the session's Transport for these inputs, made
// when it has none or one for others (the old one's connections are
// closed); a nil Session makes one for the probe alone. Pass it to
// releaseHTTP after the probe.
func (s *Session) httpTransport(sc scope, h2c, keepAlive bool, tlsCfg *tls.Config) *http.Transport {
	if s == nil {
		return newTransport(sc, h2c, keepAlive, tlsCfg)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if st := s.http; st != nil && st.h2c == h2c && st.keepAlive == keepAlive && st.tls == tlsCfg &&
		st.sc.guard == sc.guard && st.sc.ns == sc.ns && slices.Equal(st.sc.podIPs, sc.podIPs) {
		return st.t
	}
	if s.http != nil {
		s.http.t.CloseIdleConnections()
	}
	s.http = &sessionTransport{t: newTransport(sc, h2c, keepAlive, tlsCfg), sc: sc, h2c: h2c, keepAlive: keepAlive, tls: tlsCfg}
	return s.http.t
}

// releaseHTTP closes t's idle connections unless the session keeps t:
// a probe that ran without a Session, raced Close, or outlived its
// Transport leaves no connection behind.
func (s *Session) releaseHTTP(t *http.Transport) {
	if s != nil {
		s.mu.Lock()
		kept := !s.closed && s.http != nil && s.http.t == t
		s.mu.Unlock()
		if kept {
			return
		}
	}
	if t.DisableKeepAlives {
		return // it never keeps one (the shared Transports among them)
	}
	t.CloseIdleConnections()
}
