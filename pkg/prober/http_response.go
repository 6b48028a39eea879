package prober

import (
	"bytes"
	"strconv"
)

// respHead is what the fast path needs of an HTTP/1.x response head.
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
	headUnusual                  // leave this response to net/http
)

// parseRespHead parses the head at the start of b. It accepts only what it
// is sure net/http reads the same way: CRLF line ends, "HTTP/1.0" or
// "HTTP/1.1", a 3-digit status, no folded lines, token names, values
// without control bytes, at most one Content-Length of plain digits, no
// Transfer-Encoding. Anything else is headUnusual, and net/http words it.
func parseRespHead(b []byte) (respHead, headState) {
	var h respHead
	// A bare LF ends a line for net/http; it is "unusual" here, and must be
	// seen before waiting for a CRLFCRLF that may never come.
	for i := bytes.IndexByte(b, '\n'); i >= 0; {
		if i == 0 || b[i-1] != '\r' {
			return h, headUnusual
		}
		j := bytes.IndexByte(b[i+1:], '\n')
		if j < 0 {
			break
		}
		i += 1 + j
	}
	end := bytes.Index(b, []byte("\r\n\r\n"))
	if end < 0 {
		return h, headMore
	}
	h.bodyAt = end + 4
	h.length = -1
	lines := b[:end+2]

	line, rest, _ := bytes.Cut(lines, []byte("\r\n"))
	switch {
	case bytes.HasPrefix(line, []byte("HTTP/1.1 ")):
	case bytes.HasPrefix(line, []byte("HTTP/1.0 ")):
		h.close = true
	default:
		return h, headUnusual
	}
	code := line[len("HTTP/1.1 "):]
	if len(code) < 3 || (len(code) > 3 && code[3] != ' ') {
		return h, headUnusual
	}
	for _, c := range code[:3] {
		if c < '0' || c > '9' {
			return h, headUnusual
		}
		h.status = h.status*10 + int(c-'0')
	}

	for len(rest) > 0 {
		line, rest, _ = bytes.Cut(rest, []byte("\r\n"))
		k, v, ok := bytes.Cut(line, []byte(":"))
		if !ok || len(k) == 0 {
			return h, headUnusual
		}
		for _, c := range k {
			if !isTokenByte(c) {
				return h, headUnusual
			}
		}
		for _, c := range v {
			if (c < ' ' && c != '\t') || c == 0x7f {
				return h, headUnusual
			}
		}
		v = bytes.Trim(v, " \t")
		switch {
		case bytes.EqualFold(k, []byte("Content-Length")):
			if h.length >= 0 || len(v) == 0 || len(v) > 18 {
				return h, headUnusual
			}
			n, err := strconv.ParseInt(string(v), 10, 64)
			if err != nil || v[0] < '0' || v[0] > '9' {
				return h, headUnusual
			}
			h.length = n
		case bytes.EqualFold(k, []byte("Transfer-Encoding")):
			return h, headUnusual
		case bytes.EqualFold(k, []byte("Connection")):
			if hasCloseToken(v) {
				h.close = true
			}
		}
	}
	return h, headOK
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
