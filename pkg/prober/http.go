package prober

import (
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"
	"unsafe"

	v1 "k8s.io/api/core/v1"
	utilnet "k8s.io/apimachinery/pkg/util/net"
	"k8s.io/klog/v2"
)

// An httpGet probe, top to bottom: the request is built as the kubelet
// builds it and rendered once per worker into a template; plain http to an
// IP literal then takes one exchange on one connection (http_exchange.go),
// anything else goes through net/http configured as the kubelet's; either
// way the response is judged as the kubelet's DoHTTPProbe judges it.
//
// No request is ever sent twice: once the exchange has written its request,
// the answer is read and judged on that connection. Whatever the exchange
// does not judge itself (1xx, 3xx, chunked, malformed, a transport error) is
// handed, with the bytes already read, to an http.Client over the same
// connection, so net/http words it and follows redirects exactly as the
// kubelet's client would. Only a dial that failed, before anything was sent,
// is retried by net/http.

// maxRedirects is how many requests one probe may make, as in Go's and the
// kubelet's redirect policy: the 10th redirect in a row is refused.
const maxRedirects = 10

// maxClients bounds the shared clients, one per distinct timeout.
const maxClients = 64

// httpProber runs httpGet probes. Its transport is built once and shared by
// all probes: keep-alives are off, so sharing costs no connection reuse, and
// probes then allocate no transport of their own.
type httpProber struct {
	// transport is the kubelet's; its dialer first looks for a connection
	// handed over by an exchange (see handover).
	transport *http.Transport
	// fastDialer dials the exchange's connections.
	fastDialer *net.Dialer
	// noFast turns the exchange off (--probe-fast-paths=false).
	noFast bool

	// clients holds one immutable *http.Client per probe timeout. The
	// client's own Timeout (not a context deadline) is what the kubelet uses,
	// and its error texts ("Client.Timeout exceeded ...") reach users in
	// events. Timeouts are mostly whole seconds, so the map stays tiny;
	// past maxClients (millisecond timeouts) a client is made per probe.
	mu      sync.RWMutex
	clients map[time.Duration]*http.Client
}

// newHTTPProber returns the HTTP prober; guard (which may be nil) checks
// every connection, and every redirect.
func newHTTPProber(guard *HostGuard) *httpProber {
	dialer := newGuardedDialer(guard)
	t := &http.Transport{
		// Probes target pods that mostly serve self-signed certificates.
		TLSClientConfig:   &tls.Config{InsecureSkipVerify: true}, //nolint:gosec // kubelet parity
		DisableKeepAlives: true,
		// Never go through the node's HTTP_PROXY: pods are reached directly.
		// A non-nil func also stops SetTransportDefaults from installing one.
		Proxy: http.ProxyURL(nil),
		// Without this Go adds Accept-Encoding: gzip, which the kubelet does not send.
		DisableCompression: true,
		DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
			if c := handedOver(ctx, addr); c != nil {
				return c, nil
			}
			return dialer.DialContext(ctx, network, addr)
		},
	}
	// The kubelet's defaults: TLS handshake and idle timeouts, and HTTP/2 over
	// TLS when the pod offers it.
	return &httpProber{
		transport:  utilnet.SetTransportDefaults(t),
		fastDialer: newFINDialer(guard),
		clients:    map[time.Duration]*http.Client{},
	}
}

// run carries out one httpGet probe.
func (p *httpProber) run(ctx context.Context, action *v1.HTTPGetAction, target Target, userAgent string, timeout time.Duration) (Result, string, error) {
	t, conn := target.Session.takeHTTP(action, target)
	if t == nil {
		var err error
		if t, err = buildHTTPTemplate(action, target, userAgent); err != nil {
			klog.V(4).InfoS("HTTP probe request could not be built", "err", err)
			return Unknown, "", err
		}
	}
	res, out, err, kept := p.runTemplate(ctx, t, conn, action, target, userAgent, timeout)
	target.Session.putHTTP(t, kept)
	return res, out, err
}

// runTemplate runs t's probe; conn is the connection kept from the last
// probe (keep-alive mode), kept the one to keep for the next.
func (p *httpProber) runTemplate(ctx context.Context, t *httpTemplate, conn *net.TCPConn,
	action *v1.HTTPGetAction, target Target, userAgent string, timeout time.Duration) (res Result, out string, err error, kept *net.TCPConn) {
	if err := checkHost(ctx, t.hostname); err != nil {
		closeConn(conn)
		return Unknown, "", err, nil
	}
	if v := klog.V(4); v.Enabled() {
		v.InfoS("HTTP probe", "url", t.url, "headers", action.HTTPHeaders, "timeout", timeout, "keepAlive", target.KeepAlive)
	}
	var over *handover
	var c *http.Client
	if t.fast && !p.noFast {
		x := p.exchange(ctx, t, conn, timeout, target.HTTPCheck)
		if x.done {
			return x.res, x.out, x.err, x.keep
		}
		// net/http gets the rest of the timeout, and the connection if the
		// request was sent on it (if not, it dials). The client is for this
		// probe only: the shared ones are per whole timeout.
		over = x.over
		klog.V(4).InfoS("HTTP probe answer left to net/http", "url", t.url, "requestSent", over != nil)
		ctx = withHandover(ctx, over)
		c = &http.Client{Timeout: x.left, Transport: p.transport, CheckRedirect: checkRedirect}
	} else {
		c = p.client(timeout)
	}
	req, err := newHTTPRequest(ctx, action, target, userAgent)
	if err != nil {
		over.release()
		return Unknown, "", err, nil
	}
	res, out, err = p.send(c, req, target.HTTPCheck)
	over.release()
	return res, out, err, nil
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
	if len(p.clients) < maxClients {
		p.clients[timeout] = c
	}
	return c
}

// probe sends req through the shared client for timeout.
func (p *httpProber) probe(req *http.Request, timeout time.Duration) (Result, string, error) {
	return p.send(p.client(timeout), req, nil)
}

// send sends req with c and judges the response as the kubelet's
// DoHTTPProbe does, then applies check (nil: none). Transport errors, timeouts included, are a Failure
// carrying the error text and a nil error; only a failure to read the body,
// and a connection or redirect the host policy refuses, are errors.
func (p *httpProber) send(c *http.Client, req *http.Request, check *HTTPCheck) (Result, string, error) {
	resp, err := c.Do(req)
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
	res, out := httpOutcome(code, body, check)
	return res, out, nil
}

// readAtMost reads up to limit bytes. Reaching the limit is not an error:
// the output is simply truncated.
func readAtMost(r io.Reader, limit int64) (data []byte, truncated bool, err error) {
	lr := &io.LimitedReader{R: r, N: limit}
	data, err = io.ReadAll(lr)
	return data, lr.N <= 0, err
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

// httpTemplate is an httpGet probe rendered once per (spec, pod IP, ports):
// the request as it goes on the wire and where to send it. A worker keeps
// it in its Session until either changes.
type httpTemplate struct {
	// What it was built from.
	action    *v1.HTTPGetAction
	podIP     string
	ports     *v1.ContainerPort
	nports    int
	keepAlive bool

	// url is the request URL as net/http words it in errors and logs;
	// hostname is what the host policy judges before anything is sent.
	url      string
	hostname string

	// fast: the exchange may skip net/http (plain http to an IP literal,
	// headers net/http would send unchanged). Otherwise only net/http runs.
	fast bool
	// addr is the IP literal and port; dialAddr the same as text.
	addr     netip.AddrPort
	dialAddr string
	// wire is the request head, byte for byte what net/http's Transport
	// writes for it, "Connection: close" included (keep-alive in keepAlive mode).
	wire []byte
}

// matches reports whether t was built from these inputs.
func (t *httpTemplate) matches(action *v1.HTTPGetAction, target Target) bool {
	return t != nil && t.action == action && t.podIP == target.PodIP &&
		t.ports == unsafe.SliceData(target.Ports) && t.nports == len(target.Ports) &&
		t.keepAlive == target.KeepAlive
}

// buildHTTPTemplate renders the probe's request through net/http itself
// (newHTTPRequest, Request.Write) so that the exchange sends exactly what
// the Transport would.
func buildHTTPTemplate(action *v1.HTTPGetAction, target Target, userAgent string) (*httpTemplate, error) {
	req, err := newHTTPRequest(context.Background(), action, target, userAgent)
	if err != nil {
		return nil, err
	}
	t := &httpTemplate{
		action: action, podIP: target.PodIP,
		ports: unsafe.SliceData(target.Ports), nports: len(target.Ports),
		keepAlive: target.KeepAlive,
		url:       req.URL.String(),
		hostname:  req.URL.Hostname(),
	}
	addr, err := netip.ParseAddr(t.hostname)
	port, perr := strconv.ParseUint(req.URL.Port(), 10, 16)
	if !fastEligible(req) || err != nil || perr != nil || !plainAddr(addr) {
		return t, nil
	}
	var b bytes.Buffer
	if err := req.Write(&b); err != nil {
		return t, nil
	}
	// Request.Write ends the head with an empty line; the Transport adds its
	// Connection header (an "extra header") right before it.
	head := bytes.TrimSuffix(b.Bytes(), []byte("\r\n"))
	conn := "Connection: close\r\n\r\n"
	if target.KeepAlive {
		conn = "Connection: keep-alive\r\n\r\n"
	}
	t.fast = true
	t.addr = netip.AddrPortFrom(addr, uint16(port))
	t.dialAddr = t.addr.String()
	t.wire = append(head, conn...)
	return t, nil
}

// fastEligible reports whether net/http would send req as Request.Write
// renders it plus "Connection: close": plain http, no userinfo, and no
// header net/http treats specially or would refuse.
func fastEligible(req *http.Request) bool {
	if req.URL.Scheme != "http" || req.URL.User != nil {
		return false
	}
	for k, vv := range req.Header {
		switch k {
		case "Connection", "Content-Length", "Transfer-Encoding", "Trailer", "Upgrade":
			return false
		}
		if !validFieldName(k) {
			return false
		}
		for _, v := range vv {
			if !validFieldValue(v) {
				return false
			}
		}
	}
	return true
}

// validFieldName is an RFC 9110 token, as the Transport requires.
func validFieldName(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		if !isTokenByte(s[i]) {
			return false
		}
	}
	return true
}

// validFieldValue has no control byte but HTAB, as the Transport requires.
func validFieldValue(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; (c < ' ' && c != '\t') || c == 0x7f {
			return false
		}
	}
	return true
}

func isTokenByte(c byte) bool {
	switch {
	case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9':
		return true
	}
	return c < 0x80 && strings.IndexByte("!#$%&'*+-.^_`|~", c) >= 0
}

// plainAddr is an address that net formats the same way from a
// netip.Addr as from its text: no zone, no IPv4-mapped IPv6.
func plainAddr(a netip.Addr) bool {
	return a.Zone() == "" && !a.Is4In6()
}
