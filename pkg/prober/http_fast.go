package prober

import (
	"context"
	"errors"
	"io"
	"net"
	"os"
	"sync"
	"time"

	"k8s.io/klog/v2"
)

// The fast path: one goroutine, one connection, one deadline, the template
// written as is and the response parsed by hand. Whatever it is not sure of
// (3xx, 1xx, chunked, malformed, any transport error but a timeout) it
// leaves to net/http, which then runs the probe and words the outcome.

const (
	fastBufSize = 16 << 10
	// drainGrace and drainLimit bound the wait for the server's FIN after a
	// response, so that the server, not the prober, holds the TIME-WAIT.
	drainGrace = 100 * time.Millisecond
	drainLimit = 64 << 10
)

var fastBufs = sync.Pool{New: func() any { return new([fastBufSize]byte) }}

// A read deadline in the past, to abort a read at once.
var longAgo = time.Unix(1, 0)

// fastDisposition says what became of one exchange.
type fastDisposition int

const (
	fastDone     fastDisposition = iota // the result stands
	fastFallback                        // run the probe through net/http
	fastStale                           // a kept connection failed before any reply: redial
)

type fastOutcome struct {
	res  Result
	out  string
	err  error
	disp fastDisposition
	// keep: the connection may carry the next request (keep-alive mode);
	// eof: the server closed it.
	keep, eof bool
}

// fastProbe runs t's exchange. ok false means nothing user-visible was
// decided and the caller must run the probe through net/http.
func (p *httpProber) fastProbe(ctx context.Context, t *httpTemplate, s *Session, timeout time.Duration) (Result, string, error, bool) {
	deadline := time.Now().Add(timeout)
	var conn *net.TCPConn
	if t.keepAlive {
		conn = s.takeHTTPConn()
	}
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
				if isRefused(err) {
					return Unknown, "", err, true
				}
				return "", "", nil, false
			}
			conn = c.(*net.TCPConn)
		}
		o := exchange(ctx, conn, t, deadline)
		switch {
		case o.disp == fastStale && reused:
			_ = conn.Close()
			conn, reused = nil, false
			continue
		case o.disp != fastDone:
			_ = conn.Close()
			return "", "", nil, false
		case o.keep && t.keepAlive:
			s.keepHTTPConn(t, conn)
		case o.eof:
			_ = conn.Close()
		default:
			// Waiting for the server's FIN would add its scheduling delay
			// to the probe's latency: wait in the background instead.
			go drainClose(conn, deadline)
		}
		return o.res, o.out, o.err, true
	}
}

// exchange writes the request and reads the response on conn.
func exchange(ctx context.Context, conn *net.TCPConn, t *httpTemplate, deadline time.Time) fastOutcome {
	_ = conn.SetDeadline(deadline)
	if ctx.Done() != nil {
		// The worker is going away: end the wait now, as net/http would.
		stop := context.AfterFunc(ctx, func() { _ = conn.SetDeadline(longAgo) })
		defer stop()
	}
	if _, err := conn.Write(t.wire); err != nil {
		return fastOutcome{disp: fastStale}
	}
	buf := fastBufs.Get().(*[fastBufSize]byte)
	defer fastBufs.Put(buf)

	// The head.
	n := 0
	var h respHead
	for {
		m, err := conn.Read(buf[n:])
		n += m
		var st headState
		h, st = parseRespHead(buf[:n])
		if st == headUnusual {
			return fastOutcome{disp: fastFallback}
		}
		if st == headOK {
			break
		}
		switch {
		case err == nil && n < len(buf):
			continue
		case deadlineHit(err):
			return fastOutcome{res: Failure, out: awaitingHeadersText(t.url, err)}
		case n == 0:
			// Nothing came back: on a kept connection the server had closed it.
			return fastOutcome{disp: fastStale}
		}
		return fastOutcome{disp: fastFallback}
	}
	if h.status < 200 || (h.status >= 300 && h.status < 400) {
		return fastOutcome{disp: fastFallback}
	}
	if h.status == 204 {
		h.length = 0 // net/http ignores a 204's body.
	}
	if h.bodyAt+MaxOutputBytes > len(buf) {
		return fastOutcome{disp: fastFallback} // a huge head: unusual
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
			return fastOutcome{res: Failure, err: readingBodyError(err)}
		}
		return fastOutcome{disp: fastFallback}
	}
	body := buf[h.bodyAt:min(n, end)]
	res, out := httpOutcome(h.status, body)
	if v := klog.V(4); v.Enabled() {
		v.InfoS("HTTP probe response", "url", t.url, "status", h.status, "truncated", int64(len(body)) == MaxOutputBytes, "body", string(body))
	}
	// Only a fully read, delimited body leaves the connection reusable.
	keep := !h.close && h.length >= 0 && int64(n-h.bodyAt) == h.length
	return fastOutcome{res: res, out: out, disp: fastDone, keep: keep, eof: eof}
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
func awaitingHeadersText(url string, _ error) string {
	return `Get "` + url + `": context deadline exceeded (Client.Timeout exceeded while awaiting headers)`
}

// readingBodyError is net/http's error for a body cut by Client.Timeout.
func readingBodyError(_ error) error {
	return errors.New("context deadline exceeded (Client.Timeout or context cancellation while reading body)")
}
