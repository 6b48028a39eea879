package kubeletparity

import (
	"bufio"
	"bytes"
	"encoding/base64"
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
	spb "google.golang.org/genproto/googleapis/rpc/status"
	"google.golang.org/protobuf/proto"
)

// h2Script is what a scripted HTTP/2 server does on each connection.
// Every connection gets the same bytes, so the kubelet's gRPC probe and
// probed's can be compared on identical answers. (These servers tested
// probed's own HTTP/2 client until it gave way to grpc-go.)
type h2Script struct {
	// preface replaces the server's opening SETTINGS frame; scriptOn goes
	// on to read requests, anything else ends the connection that way.
	preface func(w *h2Writer) scriptEnd
	// answer runs once a Health/Check request (HEADERS and its END_STREAM
	// DATA) has been read; n counts the requests on this connection.
	answer func(w *h2Writer, stream uint32, n int) scriptEnd
}

type scriptEnd int

const (
	scriptOn     scriptEnd = iota // keep reading, answer what comes
	scriptClose                   // FIN, then read until the client closes
	scriptReset                   // RST (SO_LINGER 0)
	scriptHangUp                  // close at once, reading nothing more
)

// h2ScriptServer serves a script on a loopback port and counts what it
// sees: connections, Health/Check requests and the client's GOAWAYs.
type h2ScriptServer struct {
	port                            int
	conns, requests, goAway, closed atomic.Int32
}

func startH2Script(t *testing.T, script h2Script) *h2ScriptServer {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := &h2ScriptServer{}
	var (
		wg    sync.WaitGroup
		mu    sync.Mutex
		open  = map[net.Conn]bool{}
		ended bool
	)
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			if ended {
				mu.Unlock()
				_ = c.Close()
				return
			}
			open[c] = true
			mu.Unlock()
			s.conns.Add(1)
			wg.Add(1)
			go func() {
				defer wg.Done()
				s.serve(c, script)
				mu.Lock()
				delete(open, c)
				mu.Unlock()
			}()
		}
	}()
	t.Cleanup(func() {
		_ = l.Close()
		mu.Lock()
		ended = true
		for c := range open {
			_ = c.Close()
		}
		mu.Unlock()
		wg.Wait()
	})
	s.port = l.Addr().(*net.TCPAddr).Port
	return s
}

func (s *h2ScriptServer) serve(c net.Conn, script h2Script) {
	defer func() {
		_ = c.Close()
		s.closed.Add(1)
	}()
	br := bufio.NewReader(c)
	if _, err := io.ReadFull(br, make([]byte, len(http2.ClientPreface))); err != nil {
		return
	}
	w := &h2Writer{conn: c, fr: http2.NewFramer(c, nil)}
	w.enc = hpack.NewEncoder(&w.buf)
	end := scriptOn
	if script.preface != nil {
		end = script.preface(w)
	} else {
		_ = w.fr.WriteSettings()
	}
	fr := http2.NewFramer(nil, br)
	fr.ReadMetaHeaders = hpack.NewDecoder(4096, nil)
	pending := map[uint32]bool{}
	n := 0
	for end == scriptOn {
		f, err := fr.ReadFrame()
		if err != nil {
			return
		}
		switch f := f.(type) {
		case *http2.MetaHeadersFrame:
			if f.PseudoValue("path") == "/grpc.health.v1.Health/Check" {
				s.requests.Add(1)
				pending[f.StreamID] = true
			}
		case *http2.DataFrame:
			if f.StreamEnded() && pending[f.StreamID] {
				delete(pending, f.StreamID)
				n++
				end = script.answer(w, f.StreamID, n)
			}
		case *http2.GoAwayFrame:
			s.goAway.Add(1)
		}
	}
	switch end {
	case scriptClose:
		_ = c.(*net.TCPConn).CloseWrite()
		_, _ = io.Copy(io.Discard, br)
	case scriptReset:
		_ = c.(*net.TCPConn).SetLinger(0)
	}
	// scriptHangUp: the deferred close.
}

// h2Writer writes a scripted connection's frames.
type h2Writer struct {
	conn net.Conn
	fr   *http2.Framer
	enc  *hpack.Encoder
	buf  bytes.Buffer
}

// block HPACK-encodes name, value pairs.
func (w *h2Writer) block(kv ...string) []byte {
	w.buf.Reset()
	for i := 0; i+1 < len(kv); i += 2 {
		_ = w.enc.WriteField(hpack.HeaderField{Name: kv[i], Value: kv[i+1]})
	}
	return bytes.Clone(w.buf.Bytes())
}

func (w *h2Writer) headers(stream uint32, end bool, kv ...string) {
	_ = w.fr.WriteHeaders(http2.HeadersFrameParam{StreamID: stream, BlockFragment: w.block(kv...), EndStream: end, EndHeaders: true})
}

func (w *h2Writer) data(stream uint32, end bool, b []byte) {
	_ = w.fr.WriteData(stream, end, b)
}

func (w *h2Writer) raw(b []byte) {
	_, _ = w.conn.Write(b)
}

// grpcOK is a gRPC response's headers.
func (w *h2Writer) grpcOK(stream uint32) {
	w.headers(stream, false, ":status", "200", "content-type", "application/grpc")
}

// trailers ends a stream with grpc-status code and kv.
func (w *h2Writer) trailers(stream uint32, code string, kv ...string) {
	w.headers(stream, true, append([]string{"grpc-status", code}, kv...)...)
}

// answer is a whole gRPC response: headers, one message, trailers.
func (w *h2Writer) answer(stream uint32, msg []byte, code string, kv ...string) {
	w.grpcOK(stream)
	w.data(stream, false, msg)
	w.trailers(stream, code, kv...)
}

// grpcMsg is a length-prefixed, uncompressed message.
func grpcMsg(b ...byte) []byte {
	m := make([]byte, 5, 5+len(b))
	binary.BigEndian.PutUint32(m[1:], uint32(len(b)))
	return append(m, b...)
}

// rawFrame is a frame header and payload, whatever they say.
func rawFrame(t http2.FrameType, flags http2.Flags, stream uint32, length int, payload []byte) []byte {
	b := []byte{byte(length >> 16), byte(length >> 8), byte(length), byte(t), byte(flags)}
	b = binary.BigEndian.AppendUint32(b, stream&(1<<31-1))
	return append(b, payload...)
}

// scriptedCase is one scripted answer to Health/Check.
type scriptedCase struct {
	name   string
	script h2Script
	// requests: how many Health/Check grpc-go sends (0: it never gets as
	// far; 2: its transparent retry of a stream the server says it never
	// processed).
	requests int
}

// answerWith is a case whose server answers each request with f and then
// ends as end says.
func answerWith(name string, end scriptEnd, f func(w *h2Writer, id uint32)) scriptedCase {
	return scriptedCase{name: name, requests: 1, script: h2Script{answer: func(w *h2Writer, id uint32, _ int) scriptEnd {
		f(w, id)
		return end
	}}}
}

// beforeRequest is a case whose server fails the connection before a
// request can be sent.
func beforeRequest(name string, requests int, preface func(w *h2Writer) scriptEnd) scriptedCase {
	return scriptedCase{name: name, requests: requests, script: h2Script{preface: preface, answer: func(*h2Writer, uint32, int) scriptEnd {
		return scriptOn // and never answer
	}}}
}

func scriptedGRPCCases() []scriptedCase {
	msg := func(b ...byte) []byte { return grpcMsg(b...) }
	serving := msg(0x08, 1)
	details := func(code int32, text string) string {
		b, err := proto.Marshal(&spb.Status{Code: code, Message: text})
		if err != nil {
			panic(err)
		}
		return base64.RawStdEncoding.EncodeToString(b)
	}
	cases := []scriptedCase{
		// Answers read as they are.
		answerWith("serving", scriptOn, func(w *h2Writer, id uint32) { w.answer(id, serving, "0") }),
		answerWith("not serving", scriptOn, func(w *h2Writer, id uint32) { w.answer(id, msg(0x08, 2), "0") }),
		answerWith("service unknown", scriptOn, func(w *h2Writer, id uint32) { w.answer(id, msg(0x08, 3), "0") }),
		answerWith("empty message: UNKNOWN", scriptOn, func(w *h2Writer, id uint32) { w.answer(id, msg(), "0") }),
		answerWith("status outside the enum", scriptOn, func(w *h2Writer, id uint32) { w.answer(id, msg(0x08, 0x80, 0x01), "0") }),
		answerWith("unknown field, then SERVING", scriptOn, func(w *h2Writer, id uint32) { w.answer(id, msg(0x12, 1, 'x', 0x08, 1), "0") }),
		answerWith("grpc+proto content type", scriptOn, func(w *h2Writer, id uint32) {
			w.headers(id, false, ":status", "200", "content-type", "application/grpc+proto")
			w.data(id, false, serving)
			w.trailers(id, "0")
		}),
		answerWith("HTTP 500 with a gRPC content type is gRPC", scriptOn, func(w *h2Writer, id uint32) {
			w.headers(id, false, ":status", "500", "content-type", "application/grpc")
			w.data(id, false, serving)
			w.trailers(id, "0")
		}),
		answerWith("message split over frames", scriptOn, func(w *h2Writer, id uint32) {
			w.grpcOK(id)
			w.data(id, false, serving[:3])
			w.data(id, false, serving[3:])
			w.trailers(id, "0")
		}),
		answerWith("headers in a CONTINUATION", scriptOn, func(w *h2Writer, id uint32) {
			b := w.block(":status", "200", "content-type", "application/grpc")
			_ = w.fr.WriteHeaders(http2.HeadersFrameParam{StreamID: id, BlockFragment: b[:2]})
			_ = w.fr.WriteContinuation(id, true, b[2:])
			w.data(id, false, serving)
			w.trailers(id, "0")
		}),
		answerWith("informational headers first", scriptOn, func(w *h2Writer, id uint32) {
			w.headers(id, false, ":status", "103")
			w.answer(id, serving, "0")
		}),
		answerWith("a PING and another stream's frames first", scriptOn, func(w *h2Writer, id uint32) {
			_ = w.fr.WritePing(false, [8]byte{1})
			w.headers(id+2, false, ":status", "200", "x-other", "stream")
			w.data(id+2, true, []byte("other"))
			_ = w.fr.WriteRSTStream(id+2, http2.ErrCodeInternal)
			w.answer(id, serving, "0")
		}),
		answerWith("GOAWAY that keeps the stream, then the answer", scriptOn, func(w *h2Writer, id uint32) {
			_ = w.fr.WriteGoAway(id, http2.ErrCodeEnhanceYourCalm, []byte("calm down"))
			w.answer(id, serving, "0")
		}),

		// OK with a missing or malformed message (an oversized one:
		// TestOversizeAnswersDeviateFromTheKubelet).
		answerWith("OK without a message", scriptOn, func(w *h2Writer, id uint32) {
			w.headers(id, true, ":status", "200", "content-type", "application/grpc", "grpc-status", "0")
		}),
		answerWith("OK, headers and trailers, no message", scriptOn, func(w *h2Writer, id uint32) {
			w.grpcOK(id)
			w.trailers(id, "0")
		}),
		answerWith("malformed message", scriptOn, func(w *h2Writer, id uint32) { w.answer(id, msg(0x08, 0x81), "0") }),
		answerWith("malformed message, error status", scriptOn, func(w *h2Writer, id uint32) { w.answer(id, msg(0x08), "13", "grpc-message", "late") }),
		answerWith("two messages", scriptOn, func(w *h2Writer, id uint32) {
			w.grpcOK(id)
			w.data(id, false, serving)
			w.data(id, false, serving)
			w.trailers(id, "0")
		}),
		answerWith("message cut short", scriptOn, func(w *h2Writer, id uint32) { w.answer(id, msg(0x08, 1)[:6], "0") }),
		answerWith("message prefix cut short", scriptOn, func(w *h2Writer, id uint32) { w.answer(id, []byte{0, 0}, "0") }),
		answerWith("message cut short by a reset", scriptOn, func(w *h2Writer, id uint32) {
			w.grpcOK(id)
			w.data(id, false, []byte{0, 0, 0})
			_ = w.fr.WriteRSTStream(id, http2.ErrCodeInternal)
		}),
		answerWith("compressed without an encoding", scriptOn, func(w *h2Writer, id uint32) { w.answer(id, append([]byte{1}, serving[1:]...), "0") }),
		answerWith("compressed with gzip", scriptOn, func(w *h2Writer, id uint32) {
			w.headers(id, false, ":status", "200", "content-type", "application/grpc", "grpc-encoding", "gzip")
			w.data(id, false, append([]byte{1}, serving[1:]...))
			w.trailers(id, "0")
		}),
		answerWith("unknown payload format", scriptOn, func(w *h2Writer, id uint32) { w.answer(id, append([]byte{2}, serving[1:]...), "0") }),
		answerWith("END_STREAM on DATA, no trailers", scriptOn, func(w *h2Writer, id uint32) {
			w.grpcOK(id)
			w.data(id, true, serving)
		}),
		answerWith("message, then error status", scriptOn, func(w *h2Writer, id uint32) { w.answer(id, serving, "5", "grpc-message", "gone") }),

		// grpc-status and grpc-message, details, malformed statuses.
		answerWith("status 17", scriptOn, func(w *h2Writer, id uint32) { w.answer(id, serving, "17") }),
		answerWith("status -1", scriptOn, func(w *h2Writer, id uint32) { w.answer(id, serving, "-1") }),
		answerWith("status not a number", scriptOn, func(w *h2Writer, id uint32) { w.answer(id, serving, "OK") }),
		answerWith("status out of range", scriptOn, func(w *h2Writer, id uint32) { w.answer(id, serving, "99999999999") }),
		answerWith("trailers without a status", scriptOn, func(w *h2Writer, id uint32) {
			w.grpcOK(id)
			w.data(id, false, serving)
			w.headers(id, true, "grpc-message", "no status")
		}),
		answerWith("two statuses, the last wins", scriptOn, func(w *h2Writer, id uint32) { w.answer(id, serving, "0", "grpc-status", "9") }),
		answerWith("status details agree", scriptOn, func(w *h2Writer, id uint32) {
			w.answer(id, serving, "5", "grpc-message", "header text", "grpc-status-details-bin", details(5, "details text"))
		}),
		answerWith("status details disagree", scriptOn, func(w *h2Writer, id uint32) {
			w.answer(id, serving, "0", "grpc-message", "fine", "grpc-status-details-bin", details(5, "details text"))
		}),
		answerWith("status details not base64", scriptOn, func(w *h2Writer, id uint32) {
			w.answer(id, serving, "5", "grpc-status-details-bin", "!!!")
		}),
		answerWith("status details not a Status", scriptOn, func(w *h2Writer, id uint32) {
			w.answer(id, serving, "5", "grpc-status-details-bin", base64.StdEncoding.EncodeToString([]byte{0xff}))
		}),

		// Not gRPC: HTTP statuses, content types, bodies.
		answerWith("HTTP 404, text", scriptOn, func(w *h2Writer, id uint32) {
			w.headers(id, true, ":status", "404", "content-type", "text/plain")
		}),
		answerWith("HTTP 503, no content type", scriptOn, func(w *h2Writer, id uint32) { w.headers(id, true, ":status", "503") }),
		answerWith("HTTP 200, JSON", scriptOn, func(w *h2Writer, id uint32) {
			w.headers(id, true, ":status", "200", "content-type", "application/json")
		}),
		answerWith("HTTP 200, HTML body", scriptOn, func(w *h2Writer, id uint32) {
			w.headers(id, false, ":status", "200", "content-type", "text/html")
			w.data(id, true, []byte("<html>\"hi\"\x00</html>"))
		}),
		answerWith("HTTP 418, a long body", scriptOn, func(w *h2Writer, id uint32) {
			w.headers(id, false, ":status", "418", "content-type", "text/plain")
			w.data(id, false, bytes.Repeat([]byte("tea "), 300))
		}),
		answerWith("HTTP 502, body, then trailers", scriptOn, func(w *h2Writer, id uint32) {
			w.headers(id, false, ":status", "502")
			w.data(id, false, []byte("bad gateway"))
			w.headers(id, true, "x-trailer", "1")
		}),
		answerWith("HTTP 299", scriptOn, func(w *h2Writer, id uint32) {
			w.headers(id, true, ":status", "299", "content-type", "application/grpcx")
		}),
		answerWith("informational with END_STREAM", scriptOn, func(w *h2Writer, id uint32) { w.headers(id, true, ":status", "100") }),
		answerWith("no :status", scriptOn, func(w *h2Writer, id uint32) { w.headers(id, true, "content-type", "text/plain") }),
		answerWith(":status not a number", scriptOn, func(w *h2Writer, id uint32) { w.headers(id, true, ":status", "2xx") }),

		// RST_STREAM with each error code.
		answerWith("headers, then RST_STREAM CANCEL", scriptOn, func(w *h2Writer, id uint32) {
			w.grpcOK(id)
			_ = w.fr.WriteRSTStream(id, http2.ErrCodeCancel)
		}),

		// Header blocks grpc-go's framer refuses.
		answerWith("upper-case header name", scriptOn, func(w *h2Writer, id uint32) {
			w.headers(id, true, ":status", "200", "Content-Type", "application/grpc", "grpc-status", "0")
		}),
		answerWith("header value with a NUL", scriptOn, func(w *h2Writer, id uint32) {
			w.headers(id, true, ":status", "200", "x-bad", "a\x00b")
		}),
		answerWith("pseudo header after a regular one", scriptOn, func(w *h2Writer, id uint32) {
			w.headers(id, true, "content-type", "application/grpc", ":status", "200")
		}),
		answerWith("unknown pseudo header", scriptOn, func(w *h2Writer, id uint32) { w.headers(id, true, ":status", "200", ":bogus", "1") }),
		answerWith("duplicate :status", scriptOn, func(w *h2Writer, id uint32) { w.headers(id, true, ":status", "200", ":status", "204") }),
		answerWith("request and response pseudo headers", scriptOn, func(w *h2Writer, id uint32) { w.headers(id, true, ":status", "200", ":path", "/") }),
		answerWith("malformed -bin metadata", scriptOn, func(w *h2Writer, id uint32) { w.answer(id, serving, "0", "x-data-bin", "***") }),
		answerWith("second headers in the middle of the stream", scriptOn, func(w *h2Writer, id uint32) {
			w.grpcOK(id)
			w.data(id, false, serving)
			w.grpcOK(id)
		}),
		answerWith("bad HPACK", scriptOn, func(w *h2Writer, id uint32) {
			_ = w.fr.WriteHeaders(http2.HeadersFrameParam{StreamID: id, BlockFragment: []byte{0xff, 0xff, 0xff, 0xff, 0xff}, EndHeaders: true})
		}),
		answerWith("DATA on stream 0", scriptOn, func(w *h2Writer, id uint32) { w.raw(rawFrame(http2.FrameData, 0, 0, 1, []byte{0})) }),
		answerWith("frame too large", scriptOn, func(w *h2Writer, id uint32) { w.raw(rawFrame(http2.FrameData, 0, id, 20000, nil)) }),
		answerWith("WINDOW_UPDATE of 0 on the stream", scriptOn, func(w *h2Writer, id uint32) {
			w.raw(rawFrame(http2.FrameWindowUpdate, 0, id, 4, []byte{0, 0, 0, 0}))
		}),
		answerWith("CONTINUATION out of place", scriptOn, func(w *h2Writer, id uint32) { _ = w.fr.WriteContinuation(id, true, nil) }),
		answerWith("HTTP/1.1 after the request", scriptOn, func(w *h2Writer, id uint32) {
			w.raw([]byte("HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\n\r\n"))
		}),

		// GOAWAY.
		answerWith("GOAWAY, then close", scriptClose, func(w *h2Writer, id uint32) { _ = w.fr.WriteGoAway(id, http2.ErrCodeNo, nil) }),
		answerWith("GOAWAY with debug data, then reset", scriptReset, func(w *h2Writer, id uint32) {
			_ = w.fr.WriteGoAway(id, http2.ErrCodeInternal, []byte("going"))
		}),
		answerWith("GOAWAY with an even stream", scriptOn, func(w *h2Writer, id uint32) { _ = w.fr.WriteGoAway(2, http2.ErrCodeNo, nil) }),
		answerWith("second GOAWAY above the first", scriptOn, func(w *h2Writer, id uint32) {
			_ = w.fr.WriteGoAway(id, http2.ErrCodeNo, nil)
			_ = w.fr.WriteGoAway(id+2, http2.ErrCodeNo, nil)
		}),

		// Connections that end after the request.
		answerWith("close after the request", scriptClose, func(*h2Writer, uint32) {}),
		answerWith("reset after the request", scriptReset, func(*h2Writer, uint32) {}),
		answerWith("headers, then close", scriptClose, func(w *h2Writer, id uint32) { w.grpcOK(id) }),
		answerWith("message, then reset", scriptReset, func(w *h2Writer, id uint32) {
			w.grpcOK(id)
			w.data(id, false, serving)
		}),
		answerWith("half a frame, then close", scriptClose, func(w *h2Writer, id uint32) { w.raw([]byte{0, 0, 7}) }),

		// A server that never answers: the RPC timeout.
		answerWith("no answer", scriptOn, func(*h2Writer, uint32) {}),
		answerWith("headers, then silence", scriptOn, func(w *h2Writer, id uint32) { w.grpcOK(id) }),
		answerWith("message, then silence", scriptOn, func(w *h2Writer, id uint32) {
			w.grpcOK(id)
			w.data(id, false, serving)
		}),

		// The server's first frame decides whether the channel is ready.
		{name: "SETTINGS ACK as the first frame", requests: 1, script: h2Script{
			preface: func(w *h2Writer) scriptEnd {
				_ = w.fr.WriteSettingsAck()
				return scriptOn
			},
			answer: func(w *h2Writer, id uint32, _ int) scriptEnd {
				w.answer(id, serving, "0")
				return scriptOn
			},
		}},

		// Connections that fail before the request.
		beforeRequest("silent, no SETTINGS", 0, func(*h2Writer) scriptEnd { return scriptOn }),
		beforeRequest("close before SETTINGS", 0, func(*h2Writer) scriptEnd { return scriptClose }),
		beforeRequest("reset before SETTINGS", 0, func(*h2Writer) scriptEnd { return scriptReset }),
		beforeRequest("HTTP/1.1 instead of SETTINGS", 0, func(w *h2Writer) scriptEnd {
			w.raw([]byte("HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\n\r\n"))
			return scriptClose
		}),
		beforeRequest("GOAWAY before SETTINGS", 0, func(w *h2Writer) scriptEnd {
			_ = w.fr.WriteGoAway(0, http2.ErrCodeNo, nil)
			return scriptOn
		}),
		beforeRequest("no stream allowed", 0, func(w *h2Writer) scriptEnd {
			_ = w.fr.WriteSettings(http2.Setting{ID: http2.SettingMaxConcurrentStreams, Val: 0})
			return scriptOn
		}),
		beforeRequest("header list limit below the request", 0, func(w *h2Writer) scriptEnd {
			_ = w.fr.WriteSettings(http2.Setting{ID: http2.SettingMaxHeaderListSize, Val: 10})
			return scriptOn
		}),
		// grpc-go sends HEADERS and waits for window to send DATA.
		beforeRequest("no window for the request", 1, func(w *h2Writer) scriptEnd {
			_ = w.fr.WriteSettings(http2.Setting{ID: http2.SettingInitialWindowSize, Val: 0})
			return scriptOn
		}),

		// The server says it never processed the stream: grpc-go sends the
		// request once more, transparently.
		{name: "GOAWAY below the stream, twice", requests: 2, script: h2Script{answer: func(w *h2Writer, id uint32, _ int) scriptEnd {
			_ = w.fr.WriteGoAway(0, http2.ErrCodeNo, nil)
			return scriptClose
		}}},
		{name: "refused, then served", requests: 2, script: h2Script{answer: func(w *h2Writer, id uint32, n int) scriptEnd {
			if n == 1 {
				_ = w.fr.WriteRSTStream(id, http2.ErrCodeRefusedStream)
			} else {
				w.answer(id, serving, "0")
			}
			return scriptOn
		}}},
		{name: "refused twice", requests: 2, script: h2Script{answer: func(w *h2Writer, id uint32, _ int) scriptEnd {
			_ = w.fr.WriteRSTStream(id, http2.ErrCodeRefusedStream)
			return scriptOn
		}}},
	}
	// Every status code, with a percent-encoded message (Unimplemented and
	// DeadlineExceeded are the kubelet's special texts).
	for code := range 17 {
		cases = append(cases, answerWith(fmt.Sprintf("status %d, trailers only", code), scriptOn, func(w *h2Writer, id uint32) {
			w.headers(id, true, ":status", "200", "content-type", "application/grpc", "grpc-status", strconv.Itoa(code),
				"grpc-message", "it%20is%3A%20%E2%9C%93%zz%4")
		}))
	}
	// RST_STREAM with every error code, and one HTTP/2 does not define.
	for code := range http2.ErrCodeHTTP11Required + 2 {
		if code == http2.ErrCodeRefusedStream {
			continue // the server says it did not process the stream: above
		}
		cases = append(cases, answerWith(fmt.Sprintf("RST_STREAM %v", code), scriptOn, func(w *h2Writer, id uint32) {
			_ = w.fr.WriteRSTStream(id, code)
		}))
	}
	return cases
}
