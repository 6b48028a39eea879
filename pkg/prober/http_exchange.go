package prober

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"net/netip"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"k8s.io/klog/v2"
)

// The exchange: one goroutine, one connection, one deadline; the template
// written as is, the answer read into a pooled buffer and parsed by hand.
// The exchange judges only what it is sure net/http reads the same way: a
// complete head with status 2xx, 4xx or 5xx, a body delimited by
// Content-Length or by the server's close, a timeout. Anything else it hands
// over, after the write, together with the connection and the bytes it
// read, to net/http (see handover), which then reads and words the rest.

const (
	fastBufSize = 16 << 10
	// drainGrace and drainLimit bound the wait for the server's FIN after a
	// response, so that the server, not the prober, holds the TIME-WAIT.
	drainGrace = 100 * time.Millisecond
	drainLimit = 64 << 10
	// handoverGrace bounds a handed-over connection beyond the probe's
	// timeout. net/http's own timeout ends every wait before that, except
	// on the body of a 101 Switching Protocols, which it never times out.
	handoverGrace = time.Second
)

var fastBufs = sync.Pool{New: func() any { return new([fastBufSize]byte) }}

// A read deadline in the past, to abort a read at once.
var longAgo = time.Unix(1, 0)

// exchangeOutcome is what became of a probe's exchange.
type exchangeOutcome struct {
	// done: res, out and err stand. keep is the connection to keep for the
	// next probe (keep-alive mode), if it may be kept.
	done bool
	res  Result
	out  string
	err  error
	keep *net.TCPConn

	// Not done: net/http runs the rest of the probe in left, on over's
	// connection, or on one of its own when over is nil (nothing was sent).
	over *handover
	left time.Duration
}

// exchange runs t's request on conn, the connection kept from the last
// probe, or on a new one. A kept connection that fails before anything at
// all is received was closed by the server while idle: it is redialed, as
// net/http's Transport retries a request on a reused idle connection.
func (p *httpProber) exchange(ctx context.Context, t *httpTemplate, conn *net.TCPConn, timeout time.Duration, check *HTTPCheck) exchangeOutcome {
	deadline := time.Now().Add(timeout)
	left := func() time.Duration { return max(time.Until(deadline), time.Millisecond) }
	reused := conn != nil
	for {
		if conn == nil {
			d := *p.fastDialer
			d.Deadline = deadline
			// Not DialTCP: its laddr is never nil, so it bind(2)s to port 0
			// before connecting, and that search cannot reuse the prober's
			// TIME-WAIT ports the way connect(2)'s own choice does.
			c, err := d.DialContext(ctx, "tcp", t.dialAddr)
			if err != nil {
				// Nothing was sent: net/http dials again and words the error.
				return exchangeOutcome{left: left()}
			}
			conn = c.(*net.TCPConn)
		}
		a, rest := roundTrip(ctx, conn, t, deadline, check)
		if rest == nil {
			x := exchangeOutcome{done: true, res: a.res, out: a.out, err: a.err}
			switch {
			case a.keep && t.keepAlive:
				x.keep = conn
			case a.eof:
				_ = conn.Close()
			default:
				// Waiting for the server's FIN would add its scheduling delay
				// to the probe's latency: wait in the background instead.
				go drainClose(conn, deadline)
			}
			return x
		}
		if reused && rest.nothingReceived() {
			_ = conn.Close()
			conn, reused = nil, false
			continue
		}
		_ = conn.SetDeadline(deadline.Add(handoverGrace))
		return exchangeOutcome{over: newHandover(t.addr, rest), left: left()}
	}
}

// answer is a response the exchange judged.
type answer struct {
	res Result
	out string
	err error
	// keep: the connection may carry the next request; eof: the server closed it.
	keep, eof bool
}

// roundTrip writes t's request on conn and reads the answer, judged with
// check (nil: the kubelet's rule alone). It returns
// rest, non-nil, when net/http must read and judge the answer instead.
func roundTrip(ctx context.Context, conn *net.TCPConn, t *httpTemplate, deadline time.Time, check *HTTPCheck) (a answer, rest *replayConn) {
	_ = conn.SetDeadline(deadline)
	if ctx.Done() != nil {
		// The worker is going away: end the wait now, as net/http would.
		stop := context.AfterFunc(ctx, func() { _ = conn.SetDeadline(longAgo) })
		defer stop()
	}
	if n, err := conn.Write(t.wire); err != nil {
		rest := newReplayConn(conn, nil, nil)
		rest.wrote, rest.writeErr = n, err
		return a, rest
	}
	buf := fastBufs.Get().(*[fastBufSize]byte)
	defer fastBufs.Put(buf)
	handOver := func(n int, err error) (answer, *replayConn) {
		return a, newReplayConn(conn, bytes.Clone(buf[:n]), err)
	}

	// The head.
	n := 0
	var h respHead
	for {
		m, err := conn.Read(buf[n:])
		n += m
		var st headState
		h, st = parseRespHead(buf[:n])
		switch {
		case st == headUnusual:
			return handOver(n, nil)
		case st == headOK:
		case err == nil && n < len(buf):
			continue
		case deadlineHit(err):
			return answer{res: Failure, out: awaitingHeadersText(t.url)}, nil
		default:
			// A transport error, or a head bigger than the buffer.
			return handOver(n, err)
		}
		break
	}
	if h.status < 200 || (h.status >= 300 && h.status < 400) || h.bodyAt+MaxOutputBytes > len(buf) {
		return handOver(n, nil)
	}
	if h.status == 204 {
		h.length = 0 // net/http ignores a 204's body.
	}

	// The body: at most MaxOutputBytes of it are kept, as readAtMost does.
	want := int64(MaxOutputBytes)
	if h.length >= 0 && h.length < want {
		want = h.length
	}
	end := h.bodyAt + int(want)
	eof := false
	for n < end {
		m, err := conn.Read(buf[n:end])
		n += m
		if err == nil {
			continue
		}
		if errors.Is(err, io.EOF) && h.length < 0 {
			eof = true
			break
		}
		if deadlineHit(err) {
			return answer{res: Failure, err: readingBodyError()}, nil
		}
		return handOver(n, err)
	}
	body := buf[h.bodyAt:min(n, end)]
	res, out := httpOutcome(h.status, body, check)
	if v := klog.V(4); v.Enabled() {
		v.InfoS("HTTP probe response", "url", t.url, "status", h.status, "truncated", int64(len(body)) == MaxOutputBytes, "body", string(body))
	}
	// Only a fully read, delimited body leaves the connection reusable.
	keep := !h.close && h.length >= 0 && int64(n-h.bodyAt) == h.length
	return answer{res: res, out: out, keep: keep, eof: eof}, nil
}

// handover passes a connection whose request was written to net/http: the
// Transport's first dial of the probe's request, to the probe's address,
// returns it (see newHTTPProber), so net/http reads the answer (the bytes
// the exchange read, then the rest) and sends nothing. Later dials, to
// redirect targets, are real ones: those are new requests, as in the kubelet.
type handover struct {
	addr netip.AddrPort
	conn atomic.Pointer[replayConn]
}

type handoverKey struct{}

func newHandover(addr netip.AddrPort, c *replayConn) *handover {
	h := &handover{addr: addr}
	h.conn.Store(c)
	return h
}

// withHandover returns ctx carrying h, or ctx when h is nil.
func withHandover(ctx context.Context, h *handover) context.Context {
	if h == nil {
		return ctx
	}
	return context.WithValue(ctx, handoverKey{}, h)
}

// handedOver returns the connection ctx hands over to a dial of addr, once.
func handedOver(ctx context.Context, addr string) net.Conn {
	h, _ := ctx.Value(handoverKey{}).(*handover)
	if h == nil {
		return nil
	}
	if ap, err := netip.ParseAddrPort(addr); err != nil || ap != h.addr {
		return nil
	}
	if c := h.conn.Swap(nil); c != nil {
		return c
	}
	return nil
}

// release closes the connection if net/http never took it (its request
// ended before it dialed, on a spent timeout). Nil-safe.
func (h *handover) release() {
	if h == nil {
		return
	}
	if c := h.conn.Swap(nil); c != nil {
		_ = c.Close()
	}
}

// replayConn is a probe connection as net/http's Transport takes it over:
// writes go nowhere (the exchange wrote the request, or failed to, and
// that failure is what a write returns); reads return what the exchange
// read, then the error its last read got, if any, else read on. Reads wait
// for the Transport's write, as the server waited for the request: the
// Transport words an error differently when it comes before the write.
type replayConn struct {
	net.Conn
	read     []byte
	readErr  error
	wrote    int
	writeErr error

	once           sync.Once
	written, ended chan struct{}
}

func newReplayConn(c net.Conn, read []byte, readErr error) *replayConn {
	return &replayConn{Conn: c, read: read, readErr: readErr, written: make(chan struct{}), ended: make(chan struct{})}
}

func (c *replayConn) Read(b []byte) (int, error) {
	select {
	case <-c.written:
	case <-c.ended:
		return c.Conn.Read(b)
	}
	if len(c.read) > 0 {
		n := copy(b, c.read)
		c.read = c.read[n:]
		return n, nil
	}
	if c.readErr != nil {
		return 0, c.readErr
	}
	return c.Conn.Read(b)
}

func (c *replayConn) Write(b []byte) (int, error) {
	select {
	case <-c.written:
	default:
		defer close(c.written)
	}
	if c.writeErr != nil {
		n := min(c.wrote, len(b))
		c.wrote -= n
		return n, c.writeErr
	}
	return len(b), nil
}

func (c *replayConn) Close() error {
	c.once.Do(func() { close(c.ended) })
	return c.Conn.Close()
}

// nothingReceived: the request found the connection dead (on a kept one,
// closed by the server while idle).
func (c *replayConn) nothingReceived() bool {
	return len(c.read) == 0 && (c.readErr != nil || c.writeErr != nil)
}

// drainClose reads until the server's EOF, briefly, then closes: the server
// closes first and its side, not the prober's, keeps the TIME-WAIT.
func drainClose(conn *net.TCPConn, deadline time.Time) {
	defer func() { _ = conn.Close() }()
	if d := time.Now().Add(drainGrace); d.Before(deadline) {
		deadline = d
	}
	_ = conn.SetReadDeadline(deadline)
	buf := fastBufs.Get().(*[fastBufSize]byte)
	defer fastBufs.Put(buf)
	for total := 0; total < drainLimit; {
		m, err := conn.Read(buf[:])
		total += m
		if err != nil {
			return
		}
	}
}

func deadlineHit(err error) bool {
	return err != nil && errors.Is(err, os.ErrDeadlineExceeded)
}

// awaitingHeadersText is net/http's Client.Timeout text for a request that
// got no complete response head in time.
func awaitingHeadersText(url string) string {
	return `Get "` + url + `": context deadline exceeded (Client.Timeout exceeded while awaiting headers)`
}

// readingBodyError is net/http's error for a body cut by Client.Timeout.
func readingBodyError() error {
	return errors.New("context deadline exceeded (Client.Timeout or context cancellation while reading body)")
}

// respHead is what the exchange needs of an HTTP/1.x response head.
type respHead struct {
	status int
	// length is Content-Length, -1 when absent (the body ends at EOF).
	length int64
	// close: the server ends the connection after this response.
	close bool
	// bodyAt is where the body starts in the buffer.
	bodyAt int
}

// headState says what parseRespHead made of the bytes so far.
type headState int

const (
	headMore    headState = iota // no complete head yet
	headOK                       // h is valid
	headUnusual                  // hand this response over to net/http
)

// parseRespHead parses the head at the start of b, line by line as
// net/http does, so that it never waits for more bytes where net/http
// would already have decided. It accepts only what it is sure net/http
// reads the same way: CRLF line ends, "HTTP/1.0" or "HTTP/1.1", a 3-digit
// status, token names, values without control bytes, at most one
// Content-Length of plain digits, no Transfer-Encoding, no folded lines.
func parseRespHead(b []byte) (respHead, headState) {
	h := respHead{length: -1}
	for i, first := 0, true; ; first = false {
		j := bytes.IndexByte(b[i:], '\n')
		if j < 0 {
			return h, headMore
		}
		line := b[i : i+j]
		i += j + 1
		// A bare LF ends a line for net/http too: unusual here.
		if len(line) == 0 || line[len(line)-1] != '\r' {
			return h, headUnusual
		}
		line = line[:len(line)-1]
		switch {
		case first:
			if !h.statusLine(line) {
				return h, headUnusual
			}
		case len(line) == 0:
			h.bodyAt = i
			return h, headOK
		case !h.field(line):
			return h, headUnusual
		}
	}
}

func (h *respHead) statusLine(line []byte) bool {
	switch {
	case bytes.HasPrefix(line, []byte("HTTP/1.1 ")):
	case bytes.HasPrefix(line, []byte("HTTP/1.0 ")):
		h.close = true
	default:
		return false
	}
	code := line[len("HTTP/1.1 "):]
	if len(code) < 3 || (len(code) > 3 && code[3] != ' ') {
		return false
	}
	for _, c := range code[:3] {
		if c < '0' || c > '9' {
			return false
		}
		h.status = h.status*10 + int(c-'0')
	}
	return true
}

func (h *respHead) field(line []byte) bool {
	k, v, ok := bytes.Cut(line, []byte(":"))
	if !ok || len(k) == 0 {
		return false
	}
	for _, c := range k {
		if !isTokenByte(c) {
			return false
		}
	}
	for _, c := range v {
		if (c < ' ' && c != '\t') || c == 0x7f {
			return false
		}
	}
	v = bytes.Trim(v, " \t")
	switch {
	case bytes.EqualFold(k, []byte("Content-Length")):
		if h.length >= 0 || len(v) == 0 || len(v) > 18 || v[0] < '0' || v[0] > '9' {
			return false
		}
		n, err := strconv.ParseInt(string(v), 10, 64)
		if err != nil {
			return false
		}
		h.length = n
	case bytes.EqualFold(k, []byte("Transfer-Encoding")):
		return false
	case bytes.EqualFold(k, []byte("Connection")):
		if hasCloseToken(v) {
			h.close = true
		}
	}
	return true
}

// hasCloseToken reports whether a Connection value lists "close".
func hasCloseToken(v []byte) bool {
	for len(v) > 0 {
		var tok []byte
		tok, v, _ = bytes.Cut(v, []byte(","))
		if bytes.EqualFold(bytes.Trim(tok, " \t"), []byte("close")) {
			return true
		}
	}
	return false
}
