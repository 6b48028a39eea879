package prober

import (
	"bytes"
	"context"
	"net/http"
	"net/netip"
	"strconv"
	"strings"
	"unsafe"

	v1 "k8s.io/api/core/v1"
)

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
	addr netip.AddrPort
	// dialAddr is addr as text, for Dialer.DialContext.
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
// (newHTTPRequest, Request.Write) so that the fast path sends exactly what
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
	t.fast = fastEligible(req)
	if !t.fast {
		return t, nil
	}
	addr, err := netip.ParseAddr(t.hostname)
	port, perr := strconv.ParseUint(req.URL.Port(), 10, 16)
	if err != nil || perr != nil || !plainAddr(addr) {
		t.fast = false
		return t, nil
	}
	t.addr = netip.AddrPortFrom(addr, uint16(port))
	t.dialAddr = t.addr.String()

	var b bytes.Buffer
	if err := req.Write(&b); err != nil {
		t.fast = false
		return t, nil
	}
	// Request.Write ends the head with an empty line; the Transport adds its
	// Connection header (an "extra header") right before it.
	head := bytes.TrimSuffix(b.Bytes(), []byte("\r\n"))
	conn := "Connection: close\r\n\r\n"
	if target.KeepAlive {
		conn = "Connection: keep-alive\r\n\r\n"
	}
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
