package prober

import (
	"bufio"
	"bytes"
	"context"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"golang.org/x/net/http/httpguts"
	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
	spb "google.golang.org/genproto/googleapis/rpc/status"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/encoding"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
)

// h2conn is the gRPC fast path's HTTP/2 client connection: one stream at a
// time, driven entirely by the probing goroutine, its buffers, framer and
// HPACK decoder pooled across connections.
//
// It promises the outcome grpc-go (v1.85, the version in go.mod) gives on
// the same bytes. Like grpc-go it sends the request only after the
// server's first SETTINGS frame, so everything before that (a dead port,
// a server that is not HTTP/2) is judged with nothing of the request
// written, and the caller may still ask grpc-go itself. From the request on,
// the answer is read by grpc-go's rules: internal/transport's http2Client
// (reader, operateHeaders, handleData, handleRSTStream, handleGoAway, Close)
// and the unary RecvMsg above it (stream.go, rpc_util.go), including its
// status codes and texts. Where grpc-go's result depends on the timing of
// its own goroutines, the order it gives when frames are read one after the
// other is the one taken: a server that closes right after its SETTINGS
// (grpc-go may see the close before it creates the stream, and reconnect),
// a GOAWAY racing grpc-go's stream creation, our deadline landing while
// DATA waits for headers (grpc-go then reads the data it has). Not reproduced: grpc-go's receive flow-control
// errors for a server that overruns our window (its windows grow with its
// BDP estimate, a matter of timing), compressors other than those
// registered in the binary (none in probed).
type h2conn struct {
	conn net.Conn
	br   *bufio.Reader
	fr   *http2.Framer
	dec  *hpack.Decoder
	wbuf []byte
	// unwatch ends the watch of the probe's context on the connection.
	unwatch func() bool

	nextStream uint32
	// ready is set once the server's first SETTINGS arrived: the point
	// where grpc-go reports the channel Ready, which decides the timeout text.
	ready bool
	// acks is the SETTINGS frames owed an ACK, sent with the next request.
	acks int
	// broken: the connection failed, went away or stopped mid-frame; it
	// carries no further stream.
	broken bool
	// unacked is received DATA not yet returned to the connection's window.
	unacked uint32

	// What the server's SETTINGS and WINDOW_UPDATEs let the next request
	// send without waiting, as grpc-go's sender would.
	maxStreamsZero   bool
	streamWindow     uint32
	sendWindow       int64
	maxHeaderList    uint32
	maxHeaderListSet bool

	// grpc-go's GOAWAY bookkeeping.
	goAway      bool
	goAwayID    uint32
	goAwayDebug string

	s  h2stream
	hb headerBlock
}

// h2stream is the current stream as grpc-go's ClientStream and its reader
// see it: the bytes of gRPC messages received, and how the stream ended.
type h2stream struct {
	id           uint32
	headerDone   bool // grpc-go's headerChan is closed
	recvCompress string
	// nonGRPC is the status of a response that is not gRPC, whose body
	// (its first 1 KiB) is being collected into body.
	nonGRPC *status.Status
	body    []byte
	data    []byte // message bytes, read up to off
	off     int
	unacked uint32

	gotMsg  bool
	serving int32

	ended bool
	// endErr is what closeStream pushed after the data: io.EOF for an end
	// of stream (endStatus then holds the stream's status, nil for OK), or
	// the error the call returns.
	endErr    error
	endStatus error
	// serverEnded: the server ended the stream (END_STREAM or RST_STREAM),
	// so the connection may carry another.
	serverEnded bool
	// unprocessed: the server refused the stream or sent a GOAWAY below it.
	unprocessed bool
	// heard: a frame for this stream arrived, or a GOAWAY that covers it.
	heard bool
	// idleDeath: the connection ended (EOF or a socket error, no garbage)
	// with nothing heard for the stream.
	idleDeath bool
}

// rpcAnswer is the outcome of one Health/Check on the fast path.
type rpcAnswer struct {
	serving int32 // the response's status when err is nil
	err     error // the call's error as grpc-go returns it: a status error
	// unprocessed: grpc-go retries such a call once, transparently.
	unprocessed bool
	// idleDeath: the connection was gone before anything came back.
	idleDeath bool
	// clean: the stream ended on the server's word and the connection can
	// carry another.
	clean bool
}

const (
	// maxRecvMessage is grpc-go's default limit on a received message.
	maxRecvMessage = 4 << 20
	// maxHeaderListSize is grpc-go's client limit on a received header
	// list, and the longest string its HPACK decoder takes.
	maxHeaderListSize = 16 << 20
	// nonGRPCBodyMax is how much of a non-gRPC response grpc-go quotes.
	nonGRPCBodyMax = 1024
	// windowUpdateAt returns received DATA to the server's windows once a
	// quarter of the default window is used, as grpc-go does.
	windowUpdateAt = 65535 / 4
)

var h2Pool = sync.Pool{New: func() any {
	c := &h2conn{br: bufio.NewReaderSize(nil, 4096)}
	c.fr = http2.NewFramer(io.Discard, c.br)
	c.fr.SetReuseFrames()
	c.fr.SetMaxReadFrameSize(16 << 10) // the default we advertise
	c.dec = hpack.NewDecoder(4096, c.onField)
	c.dec.SetMaxStringLength(maxHeaderListSize)
	return c
}}

// newH2Conn wraps a fresh TCP connection; nothing is sent yet.
func newH2Conn(conn net.Conn) *h2conn {
	c := h2Pool.Get().(*h2conn)
	c.conn = conn
	c.br.Reset(conn)
	c.nextStream = 1
	c.ready, c.acks, c.broken, c.unacked = false, 0, false, 0
	c.maxStreamsZero, c.streamWindow, c.sendWindow, c.maxHeaderListSet = false, 65535, 65535, false
	c.goAway, c.goAwayID, c.goAwayDebug = false, 0, ""
	return c
}

// close closes the connection. When clean, the last exchange ended on a
// frame boundary and the rest can serve another connection.
func (c *h2conn) close(clean bool) {
	c.release()
	_ = c.conn.Close()
	c.conn = nil
	if !clean {
		return
	}
	c.br.Reset(nil)
	// Empty the dynamic table: the next connection starts afresh.
	c.dec.SetMaxDynamicTableSize(0)
	c.dec.SetMaxDynamicTableSize(4096)
	if cap(c.s.data) > 4096 {
		c.s.data = nil
	}
	c.s.nonGRPC, c.s.endErr, c.s.endStatus = nil, nil, nil
	c.hb = headerBlock{}
	h2Pool.Put(c)
}

// dialH2 opens the TCP connection through the probe dialer, so the host
// guard judges it like any other probe connection. With creds (grpc.mode
// TLS) it then runs grpc-go's own client handshake on it, so that the
// TLS settings, server name and ALPN rule are grpc-go's.
func dialH2(ctx context.Context, d *net.Dialer, addr string, creds credentials.TransportCredentials) (*h2conn, error) {
	conn, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, err
	}
	if creds != nil {
		if conn, _, err = creds.ClientHandshake(ctx, addr, conn); err != nil {
			return nil, err
		}
	}
	return newH2Conn(conn), nil
}

// clientPreface is the connection preface and an empty SETTINGS frame,
// what grpc-go sends with its default options.
var clientPreface = append([]byte(http2.ClientPreface), 0, 0, 0, byte(http2.FrameSettings), 0, 0, 0, 0, 0)

var errNotSettings = errors.New("first frame from the server is not SETTINGS")

// handshake sends the preface and reads the server's first frame, which
// must be SETTINGS, as grpc-go's readServerPreface requires. Nothing of the
// request is written yet.
func (c *h2conn) handshake() error {
	if _, err := c.conn.Write(clientPreface); err != nil {
		c.broken = true
		return err
	}
	f, err := c.fr.ReadFrame()
	if err != nil {
		c.broken = true
		return err
	}
	sf, ok := f.(*http2.SettingsFrame)
	if !ok {
		c.broken = true
		return errNotSettings
	}
	c.ready = true
	if !sf.IsAck() {
		c.acks = 1 // sent with the request, as grpc-go's writer orders it
		c.settings(sf)
	}
	return nil
}

// settings records what a SETTINGS frame changes for our sending.
func (c *h2conn) settings(f *http2.SettingsFrame) {
	for i := range f.NumSettings() {
		switch s := f.Setting(i); s.ID {
		case http2.SettingMaxConcurrentStreams:
			c.maxStreamsZero = s.Val == 0
		case http2.SettingInitialWindowSize:
			c.streamWindow = s.Val
		case http2.SettingMaxHeaderListSize:
			c.maxHeaderList, c.maxHeaderListSet = s.Val, true
		}
	}
}

// canSend reports whether t's request goes out at once, in one HEADERS
// and one DATA frame, as grpc-go would send it. Otherwise (a server that
// allows no stream, a window or header list too small) grpc-go would wait
// or fail before sending; the caller then asks grpc-go.
func (c *h2conn) canSend(t *grpcTemplate) bool {
	n := int64(len(t.data))
	return !c.broken && !c.goAway && !c.maxStreamsZero && c.nextStream <= 1<<31-1 &&
		int64(c.streamWindow) >= n && c.sendWindow >= n &&
		(!c.maxHeaderListSet || int64(c.maxHeaderList) >= t.listSize)
}

func appendFrameHeader(b []byte, length int, t http2.FrameType, flags http2.Flags, stream uint32) []byte {
	b = append(b, byte(length>>16), byte(length>>8), byte(length), byte(t), byte(flags))
	return binary.BigEndian.AppendUint32(b, stream&(1<<31-1))
}

// watch bounds the connection's I/O by ctx, until release: its deadline
// becomes the connection's, and a cancellation cuts the I/O short.
func (c *h2conn) watch(ctx context.Context) {
	if c.unwatch != nil {
		return
	}
	deadline, _ := ctx.Deadline()
	_ = c.conn.SetDeadline(deadline)
	conn := c.conn // the callback may outlive the watch, and c
	c.unwatch = context.AfterFunc(ctx, func() { _ = conn.SetDeadline(time.Unix(1, 0)) })
}

func (c *h2conn) release() {
	if c.unwatch != nil {
		c.unwatch()
		c.unwatch = nil
	}
}

// call sends one Health/Check on a new stream and reads until grpc-go's
// unary call would return, within ctx.
func (c *h2conn) call(ctx context.Context, t *grpcTemplate) rpcAnswer {
	c.watch(ctx)
	deadline, _ := ctx.Deadline()
	c.send(t, deadline)
	s := &c.s
	for {
		if done, err := c.answer(); done {
			a := rpcAnswer{serving: s.serving, err: err, unprocessed: s.unprocessed, idleDeath: s.idleDeath}
			a.clean = s.serverEnded && !c.broken && !c.goAway
			return a
		}
		f, err := c.fr.ReadFrame()
		if err != nil {
			c.readError(ctx, deadline, err)
			continue
		}
		c.frame(f, deadline)
	}
}

// send writes the request: the ACKs owed, the window returned, HEADERS
// from the template with this call's grpc-timeout, DATA. A failed write is
// left for the reader to find, as grpc-go's writer does.
func (c *h2conn) send(t *grpcTemplate, deadline time.Time) {
	c.s = h2stream{id: c.nextStream, data: c.s.data[:0], body: c.s.body[:0]}
	c.nextStream += 2
	b := c.wbuf[:0]
	for ; c.acks > 0; c.acks-- {
		b = appendFrameHeader(b, 0, http2.FrameSettings, http2.FlagSettingsAck, 0)
	}
	if c.unacked > 0 {
		b = appendFrameHeader(b, 4, http2.FrameWindowUpdate, 0, 0)
		b = binary.BigEndian.AppendUint32(b, c.unacked)
		c.unacked = 0
	}
	hdrAt := len(b)
	b = appendFrameHeader(b, 0, http2.FrameHeaders, http2.FlagHeadersEndHeaders, c.s.id)
	b = append(b, t.headers...)
	if !deadline.IsZero() {
		b = appendGRPCTimeout(b, time.Until(deadline))
	}
	n := len(b) - hdrAt - 9
	b[hdrAt], b[hdrAt+1], b[hdrAt+2] = byte(n>>16), byte(n>>8), byte(n)
	b = appendFrameHeader(b, len(t.data), http2.FrameData, http2.FlagDataEndStream, c.s.id)
	b = append(b, t.data...)
	c.wbuf = b
	c.sendWindow -= int64(len(t.data))
	if _, err := c.conn.Write(b); err != nil {
		c.broken = true
	}
}

// write sends a control frame; like grpc-go, a failure is left to the reader.
func (c *h2conn) write(b []byte) {
	if _, err := c.conn.Write(b); err != nil {
		c.broken = true
	}
}

// readError: grpc-go's reader on a failed read. A stream error ends only
// that stream; anything else ends the connection, unless it is our own
// deadline or cancellation, which grpc-go meets through the call's context.
func (c *h2conn) readError(ctx context.Context, deadline time.Time, err error) {
	s := &c.s
	if se, ok := err.(http2.StreamError); ok {
		if se.StreamID == s.id {
			s.heard = true
			msg := "received invalid frame"
			if d := c.fr.ErrorDetail(); d != nil {
				msg = d.Error()
			}
			s.end(status.Error(h2ErrCode(se.Code), msg), nil, false)
		}
		return
	}
	c.broken = true
	if ctx.Err() != nil || errors.Is(err, os.ErrDeadlineExceeded) {
		if errors.Is(ctx.Err(), context.Canceled) {
			s.end(status.Error(codes.Canceled, context.Canceled.Error()), nil, false)
		} else {
			s.end(status.Error(codes.DeadlineExceeded, context.DeadlineExceeded.Error()), nil, false)
		}
		return
	}
	var op *net.OpError
	s.idleDeath = !s.heard && (err == io.EOF || errors.As(err, &op))
	c.closeTransport(fmt.Sprintf("error reading from server: %v", grpcReadError(err)))
}

// grpcRawReads mirrors grpc-go's GRPC_GO_EXPERIMENTAL_HTTP_FRAMER_READ_BUFFER_POOLING
// (on unless "false"), which it reads once at start as well.
var grpcRawReads = !strings.EqualFold(os.Getenv("GRPC_GO_EXPERIMENTAL_HTTP_FRAMER_READ_BUFFER_POOLING"), "false")

// grpcReadError is a socket read error as grpc-go sees it: with its pooled
// reader it reads a TCP connection with raw syscalls, so a reset is the bare
// errno, without net's "read tcp a->b: read:" around it.
func grpcReadError(err error) error {
	var op *net.OpError
	var se *os.SyscallError
	if grpcRawReads && errors.As(err, &op) && op.Op == "read" && errors.As(op.Err, &se) {
		return se.Err
	}
	return err
}

// closeTransport is grpc-go's http2Client.Close as the stream sees it.
func (c *h2conn) closeTransport(desc string) {
	c.broken = true
	if c.goAwayDebug != "" {
		c.s.end(status.Errorf(codes.Unavailable, "closing transport due to: connection error: desc = %q, received prior goaway: %v", desc, c.goAwayDebug), nil, false)
		return
	}
	c.s.end(status.Error(codes.Unavailable, desc), nil, false)
}

// end is grpc-go's closeStream: err follows the data already received.
func (s *h2stream) end(err, st error, byServer bool) {
	if s.ended {
		return
	}
	s.ended, s.headerDone = true, true
	s.endErr, s.endStatus, s.serverEnded = err, st, byServer
}

// frame is grpc-go's reader dispatching one frame.
func (c *h2conn) frame(f http2.Frame, deadline time.Time) {
	s := &c.s
	switch f := f.(type) {
	case *http2.HeadersFrame:
		if f.StreamID == s.id {
			s.heard = true
		}
		c.hb.begin(f.StreamID, f.StreamEnded())
		c.headerFragment(f.HeaderBlockFragment(), f.HeadersEnded(), false)
	case *http2.ContinuationFrame:
		c.headerFragment(f.HeaderBlockFragment(), f.HeadersEnded(), true)
	case *http2.DataFrame:
		c.data(f)
	case *http2.RSTStreamFrame:
		if f.StreamID != s.id {
			return
		}
		s.heard = true
		if f.ErrCode == http2.ErrCodeRefusedStream {
			s.unprocessed = true
		}
		code := h2ErrCode(f.ErrCode)
		if code == codes.Canceled && !deadline.IsZero() && !deadline.After(time.Now()) {
			code = codes.DeadlineExceeded
		}
		s.end(status.Errorf(code, "stream terminated by RST_STREAM with error code: %v", f.ErrCode), nil, true)
	case *http2.SettingsFrame:
		if !f.IsAck() {
			c.settings(f)
			c.write(appendFrameHeader(c.wbuf[:0], 0, http2.FrameSettings, http2.FlagSettingsAck, 0))
		}
	case *http2.PingFrame:
		if !f.IsAck() {
			b := appendFrameHeader(c.wbuf[:0], 8, http2.FramePing, http2.FlagPingAck, 0)
			c.write(append(b, f.Data[:]...))
		}
	case *http2.GoAwayFrame:
		c.goAwayFrame(f)
	case *http2.WindowUpdateFrame:
		if f.StreamID == 0 {
			c.sendWindow += int64(f.Increment)
		}
	}
	// PRIORITY, PUSH_PROMISE and unknown frames: grpc-go ignores them.
}

// data is grpc-go's handleData.
func (c *h2conn) data(f *http2.DataFrame) {
	s := &c.s
	c.unacked += f.Length
	if c.unacked >= windowUpdateAt {
		b := appendFrameHeader(c.wbuf[:0], 4, http2.FrameWindowUpdate, 0, 0)
		c.write(binary.BigEndian.AppendUint32(b, c.unacked))
		c.unacked = 0
	}
	if f.StreamID != s.id || s.ended {
		return
	}
	s.heard = true
	if s.unacked += f.Length; s.unacked >= windowUpdateAt && !f.StreamEnded() {
		b := appendFrameHeader(c.wbuf[:0], 4, http2.FrameWindowUpdate, 0, s.id)
		c.write(binary.BigEndian.AppendUint32(b, s.unacked))
		s.unacked = 0
	}
	d := f.Data()
	if s.nonGRPC != nil {
		s.body = append(s.body, d[:min(len(d), nonGRPCBodyMax-len(s.body))]...)
		if len(s.body) >= nonGRPCBodyMax || f.StreamEnded() {
			s.end(s.nonGRPCStatus(), nil, f.StreamEnded())
		}
		return
	}
	s.data = append(s.data, d...)
	if f.StreamEnded() {
		s.end(io.EOF, errNoTrailers, true)
	}
}

var (
	errNoTrailers = status.Error(codes.Internal, "server closed the stream without sending trailers")
	// grpc-go's errStreamDrain: a stream the server's GOAWAY left out.
	errStreamDrain = status.Error(codes.Unavailable, "the connection is draining")
)

func (s *h2stream) nonGRPCStatus() error {
	return status.Errorf(s.nonGRPC.Code(), "%s\ndata: %q", s.nonGRPC.Message(), s.body)
}

// goAwayFrame is grpc-go's handleGoAway. The two GOAWAYs it calls
// connection errors (an even stream ID, a second GOAWAY above the first)
// only set the error its reader would close with if it stopped there; it
// reads on, so they change nothing.
func (c *h2conn) goAwayFrame(f *http2.GoAwayFrame) {
	s := &c.s
	id := f.LastStreamID
	if id >= s.id {
		s.heard = true
	}
	if id > 0 && id%2 == 0 || c.goAway && id > c.goAwayID {
		return
	}
	if !c.goAway {
		c.goAway = true
		if len(f.DebugData()) == 0 {
			c.goAwayDebug = fmt.Sprintf("code: %s", f.ErrCode)
		} else {
			c.goAwayDebug = fmt.Sprintf("code: %s, debug data: %q", f.ErrCode, string(f.DebugData()))
		}
	}
	upper := c.goAwayID
	if upper == 0 {
		upper = math.MaxUint32
	}
	c.goAwayID = id
	if s.id > id && s.id <= upper {
		s.unprocessed = true
		s.end(errStreamDrain, nil, false)
	}
}

// h2ErrCode is grpc-go's mapping of an HTTP/2 error code to a gRPC code.
func h2ErrCode(e http2.ErrCode) codes.Code {
	switch e {
	case http2.ErrCodeFlowControl, http2.ErrCodeEnhanceYourCalm:
		return codes.ResourceExhausted
	case http2.ErrCodeRefusedStream:
		return codes.Unavailable
	case http2.ErrCodeCancel:
		return codes.Canceled
	case http2.ErrCodeInadequateSecurity:
		return codes.PermissionDenied
	case http2.ErrCodeNo, http2.ErrCodeProtocol, http2.ErrCodeInternal, http2.ErrCodeSettingsTimeout,
		http2.ErrCodeStreamClosed, http2.ErrCodeFrameSize, http2.ErrCodeCompression, http2.ErrCodeConnect,
		http2.ErrCodeHTTP11Required:
		return codes.Internal
	}
	return codes.Unknown
}

// httpStatusCode is grpc-go's HTTPStatusConvTab.
func httpStatusCode(n int) codes.Code {
	switch n {
	case http.StatusBadRequest:
		return codes.Internal
	case http.StatusUnauthorized:
		return codes.Unauthenticated
	case http.StatusForbidden:
		return codes.PermissionDenied
	case http.StatusNotFound:
		return codes.Unimplemented
	case http.StatusTooManyRequests, http.StatusBadGateway, http.StatusServiceUnavailable, http.StatusGatewayTimeout:
		return codes.Unavailable
	}
	return codes.Unknown
}

// headerBlock is one header block being decoded: the checks of x/net's
// readMetaFrame (as grpc-go configures it) and what grpc-go's
// operateHeaders takes from the fields, gathered as they are decoded.
type headerBlock struct {
	stream    uint32
	endStream bool

	// readMetaFrame's checks.
	remain, trailerRemain uint32
	sawRegular, truncated bool
	invalid               error
	pseudoErr             error
	pseudoSeen            uint8
	request, response     bool

	// operateHeaders's loop; it stops at a malformed grpc-status.
	badStatus      error
	grpcContent    bool
	contentType    int8 // 0 none, 1 valid, -1 invalid (badContentType)
	badContentType string
	grpcStatus     codes.Code
	grpcMessage    string
	httpStatus     string
	recvCompress   string
	headerError    string
	details        int
	detail         string
}

func (h *headerBlock) begin(stream uint32, endStream bool) {
	*h = headerBlock{stream: stream, endStream: endStream, remain: maxHeaderListSize, trailerRemain: maxHeaderListSize, grpcStatus: codes.Unknown}
}

// headerFragment decodes one HEADERS or CONTINUATION fragment.
func (c *h2conn) headerFragment(frag []byte, end, continuation bool) {
	h := &c.hb
	if continuation {
		if int64(len(frag)) > 2*int64(h.remain+h.trailerRemain) || h.invalid != nil {
			c.closeTransport("error reading from server: " + http2.ConnectionError(http2.ErrCodeProtocol).Error())
			return
		}
	} else {
		c.dec.SetEmitEnabled(true)
	}
	if _, err := c.dec.Write(frag); err != nil {
		c.closeTransport("error reading from server: " + http2.ConnectionError(http2.ErrCodeCompression).Error())
		return
	}
	if !end {
		return
	}
	if err := c.dec.Close(); err != nil {
		c.closeTransport("error reading from server: " + http2.ConnectionError(http2.ErrCodeCompression).Error())
		return
	}
	invalid := h.invalid
	if invalid == nil {
		invalid = h.pseudoErr
	}
	if invalid == nil && h.request && h.response {
		invalid = errors.New("mix of request and response pseudo headers")
	}
	if h.stream != c.s.id || c.s.ended {
		return
	}
	if invalid != nil {
		c.s.end(status.Error(codes.Internal, invalid.Error()), nil, false)
		return
	}
	c.operateHeaders()
}

var pseudoNames = [...]string{":method", ":path", ":scheme", ":authority", ":protocol", ":status"}

// onField sees each decoded field of a block: readMetaFrame's emit
// function, then one step of operateHeaders's loop.
func (c *h2conn) onField(f hpack.HeaderField) {
	h := &c.hb
	if !httpguts.ValidHeaderFieldValue(f.Value) {
		h.invalid = fmt.Errorf("invalid header field value for %q", f.Name)
	}
	pseudo := strings.HasPrefix(f.Name, ":")
	if pseudo {
		if h.sawRegular {
			h.invalid = errors.New("pseudo header field after regular")
		}
	} else {
		h.sawRegular = true
		if !validWireHeaderFieldName(f.Name) {
			h.invalid = fmt.Errorf("invalid header field name %q", f.Name)
		}
	}
	if h.invalid != nil {
		c.dec.SetEmitEnabled(false)
		return
	}
	remain, size := &h.remain, f.Size()
	if f.Name == "trailer" {
		n := strings.Count(f.Value, ",") + 1
		remain, size = &h.trailerRemain, uint32(len(f.Value)-n+1)+uint32(n)*32
	}
	if size > *remain {
		c.dec.SetEmitEnabled(false)
		h.truncated, h.remain, h.trailerRemain = true, 0, 0
		return
	}
	*remain -= size
	if pseudo && h.pseudoErr == nil {
		h.checkPseudo(f.Name)
	}
	if h.stream != c.s.id || h.badStatus != nil {
		return
	}
	switch f.Name {
	case "content-type":
		if v := f.Value; v == "application/grpc" || strings.HasPrefix(v, "application/grpc") && (v[16] == '+' || v[16] == ';') {
			h.contentType, h.grpcContent = 1, true
		} else {
			h.contentType, h.badContentType = -1, v
		}
	case "grpc-encoding":
		h.recvCompress = f.Value
	case "grpc-status":
		code, err := strconv.ParseInt(f.Value, 10, 32)
		if err != nil {
			h.badStatus = err
			return
		}
		h.grpcStatus = codes.Code(uint32(code))
	case "grpc-message":
		h.grpcMessage = f.Value
	case ":status":
		h.httpStatus = f.Value
	default:
		if !strings.HasSuffix(f.Name, "-bin") || reservedHeader(f.Name) {
			return
		}
		v, err := decodeBinHeader(f.Value)
		if err != nil {
			h.headerError = fmt.Sprintf("transport: malformed %s: %v", f.Name, err)
			return
		}
		if f.Name == "grpc-status-details-bin" {
			h.details++
			h.detail = string(v)
		}
	}
}

// checkPseudo is x/net's checkPseudos, one field at a time.
func (h *headerBlock) checkPseudo(name string) {
	for i, p := range pseudoNames {
		if name != p {
			continue
		}
		if h.pseudoSeen&(1<<i) != 0 {
			h.pseudoErr = fmt.Errorf("duplicate pseudo-header %q", name)
			return
		}
		h.pseudoSeen |= 1 << i
		if p == ":status" {
			h.response = true
		} else {
			h.request = true
		}
		return
	}
	h.pseudoErr = fmt.Errorf("invalid pseudo-header %q", name)
}

func validWireHeaderFieldName(v string) bool {
	if v == "" {
		return false
	}
	for _, r := range v {
		if !httpguts.IsTokenRune(r) || 'A' <= r && r <= 'Z' {
			return false
		}
	}
	return true
}

// reservedHeader is grpc-go's isReservedHeader less its whitelist, for the
// names that reach the metadata decoding.
func reservedHeader(name string) bool {
	switch name {
	case "content-type", "grpc-message-type", "grpc-encoding", "grpc-message", "grpc-status", "grpc-timeout", "te":
		return true
	}
	return name[0] == ':' && name != ":authority"
}

func decodeBinHeader(v string) ([]byte, error) {
	if len(v)%4 == 0 {
		return base64.StdEncoding.DecodeString(v)
	}
	return base64.RawStdEncoding.DecodeString(v)
}

// operateHeaders is grpc-go's, for a valid block on our stream.
func (c *h2conn) operateHeaders() {
	s, h := &c.s, &c.hb
	initial := !s.headerDone
	switch {
	case !initial && !h.endStream:
		s.end(status.Error(codes.Internal, "a HEADERS frame cannot appear in the middle of a stream"), nil, false)
		return
	case h.truncated:
		s.end(status.Error(codes.Internal, "peer header list size exceeded limit"), nil, false)
		return
	case s.nonGRPC != nil:
		if h.endStream {
			s.end(s.nonGRPCStatus(), nil, true)
		}
		return
	case h.badStatus != nil:
		s.end(status.Errorf(codes.Unknown, "transport: malformed grpc-status: %v", h.badStatus), nil, false)
		return
	}
	if initial && !h.grpcContent {
		c.nonGRPCHeaders()
		return
	}
	if h.headerError != "" {
		s.end(status.Error(codes.Internal, h.headerError), nil, false)
		return
	}
	if !h.endStream {
		s.headerDone, s.recvCompress = true, h.recvCompress
		return
	}
	s.end(io.EOF, h.trailerStatus(), true)
}

// nonGRPCHeaders: the first headers of a response that is not gRPC.
func (c *h2conn) nonGRPCHeaders() {
	s, h := &c.s, &c.hb
	code := codes.Internal
	var msg string
	if h.httpStatus == "" {
		msg = "malformed header: missing HTTP status"
	} else {
		n, err := strconv.Atoi(h.httpStatus)
		if err != nil {
			s.end(status.Errorf(codes.Internal, "transport: malformed http-status: %v", err), nil, false)
			return
		}
		if n >= 100 && n < 200 {
			if h.endStream {
				s.end(status.Errorf(codes.Internal, "protocol error: informational header with status code %d must not have END_STREAM set", n), nil, false)
			}
			return // informational: the real headers follow
		}
		msg = fmt.Sprintf("unexpected HTTP status code received from server: %d (%s)", n, http.StatusText(n))
		code = httpStatusCode(n)
	}
	switch h.contentType {
	case 0:
		msg += "; malformed header: missing HTTP content-type"
	case -1:
		msg += fmt.Sprintf("; transport: received unexpected content-type %q", h.badContentType)
	}
	st := status.New(code, msg)
	if h.endStream {
		s.end(st.Err(), nil, true)
		return
	}
	s.nonGRPC = st
}

// trailerStatus is grpc-go's NewWithProto over the trailers: nil for OK.
func (h *headerBlock) trailerStatus() error {
	code, msg := h.grpcStatus, h.grpcMessage
	if code == codes.OK && h.details == 0 {
		return nil
	}
	msg = decodeGrpcMessage(msg)
	if h.details != 1 {
		return status.Error(code, msg)
	}
	st := &spb.Status{}
	if err := proto.Unmarshal([]byte(h.detail), st); err != nil {
		return status.Error(code, msg)
	}
	if st.Code == int32(code) {
		return status.FromProto(st).Err()
	}
	return status.Errorf(codes.Internal, "grpc-status-details-bin mismatch: grpc-status=%v, grpc-message=%q, grpc-status-details-bin=%+v", code, msg, st)
}

// decodeGrpcMessage undoes grpc-message's percent-encoding as grpc-go
// does: a '%' not followed by two hex digits stays as it is.
func decodeGrpcMessage(msg string) string {
	if !strings.Contains(msg, "%") {
		return msg
	}
	var sb strings.Builder
	for i := 0; i < len(msg); i++ {
		if msg[i] == '%' && i+2 < len(msg) {
			if v, err := strconv.ParseUint(msg[i+1:i+3], 16, 8); err == nil {
				sb.WriteByte(byte(v))
				i += 2
				continue
			}
		}
		sb.WriteByte(msg[i])
	}
	return sb.String()
}

var (
	errNoResponse    = status.Error(codes.Internal, "cardinality violation: received no response message from non-server-streaming RPC")
	errExtraResponse = status.Error(codes.Internal, "cardinality violation: expected <EOF> for non server-streaming RPCs, but received another message")
	errUnexpectedEOF = status.Error(codes.Internal, io.ErrUnexpectedEOF.Error())
)

// answer is what grpc-go's unary call returns given what the stream has so
// far (clientStreamWrapper.RecvMsg twice over csAttempt.recvMsg); done is
// false while the call would still wait.
func (c *h2conn) answer() (done bool, err error) {
	s := &c.s
	if !s.headerDone {
		return false, nil
	}
	for {
		msg, err, ok := s.next()
		switch {
		case !ok:
			return false, nil
		case err == io.EOF:
			if s.endStatus != nil {
				return true, s.endStatus
			}
			if !s.gotMsg {
				return true, errNoResponse
			}
			return true, nil
		case err != nil:
			return true, err
		}
		serving, err := decodeHealthResponse(msg)
		if err != nil {
			return true, err
		}
		if s.gotMsg {
			return true, errExtraResponse
		}
		s.gotMsg, s.serving = true, serving
	}
}

// next reads the next message as grpc-go's parser and recvAndDecompress
// do; ok is false while it would wait for more.
func (s *h2stream) next() (msg []byte, err error, ok bool) {
	b := s.data[s.off:]
	if len(b) >= 5 {
		n := binary.BigEndian.Uint32(b[1:5])
		if n > maxRecvMessage {
			return nil, status.Errorf(codes.ResourceExhausted, "grpc: received message larger than max (%d vs. %d)", n, maxRecvMessage), true
		}
		if uint32(len(b)-5) >= n {
			s.off += 5 + int(n)
			return s.payload(b[0], b[5:5+n])
		}
	}
	switch {
	case !s.ended:
		return nil, nil, false
	case s.endErr == io.EOF && len(b) > 0:
		// A message cut short by the end of the stream.
		return nil, errUnexpectedEOF, true
	}
	return nil, s.endErr, true
}

// payload is grpc-go's checkRecvPayload and decompression.
func (s *h2stream) payload(format byte, msg []byte) ([]byte, error, bool) {
	switch format {
	case 0:
		return msg, nil, true
	case 1:
		msg, err := decompress(s.recvCompress, msg)
		return msg, err, true
	}
	return nil, status.Errorf(codes.Internal, "grpc: received unexpected payload format %d", format), true
}

// decompress is grpc-go's for a compressed message: only compressors
// registered in this binary can read it (probed registers none).
func decompress(name string, msg []byte) ([]byte, error) {
	if name == "" || name == "identity" {
		return nil, status.Error(codes.Internal, "grpc: compressed flag set with identity or empty encoding")
	}
	comp := encoding.GetCompressor(name)
	if comp == nil {
		return nil, status.Errorf(codes.Internal, "grpc: Decompressor is not installed for grpc-encoding %q", name)
	}
	r, err := comp.Decompress(bytes.NewReader(msg))
	if err != nil {
		return nil, status.Errorf(codes.Internal, "grpc: failed to decompress the message: %v", err)
	}
	if cl, ok := r.(io.Closer); ok {
		defer func() { _ = cl.Close() }()
	}
	out, err := io.ReadAll(io.LimitReader(r, maxRecvMessage+1))
	if err != nil {
		return nil, status.Errorf(codes.Internal, "grpc: failed to read decompressed data: %v", err)
	}
	if len(out) > maxRecvMessage {
		return nil, status.Errorf(codes.ResourceExhausted, "grpc: received message after decompression larger than max %d", maxRecvMessage)
	}
	return out, nil
}

// decodeHealthResponse unmarshals a HealthCheckResponse as grpc-go's proto
// codec does; the common encodings are read without allocating.
func decodeHealthResponse(msg []byte) (int32, error) {
	switch {
	case len(msg) == 0:
		return 0, nil
	case len(msg) == 2 && msg[0] == 0x08 && msg[1] < 0x80:
		return int32(msg[1]), nil
	}
	var r healthpb.HealthCheckResponse
	if err := proto.Unmarshal(msg, &r); err != nil {
		return 0, status.Errorf(codes.Internal, "grpc: failed to unmarshal the received message: %v", err)
	}
	return int32(r.GetStatus()), nil
}

// grpcTemplate is the constant part of one health RPC: the HPACK-encoded
// request headers (without grpc-timeout, which changes per probe) and the
// DATA payload, the 5-byte gRPC prefix and the HealthCheckRequest. Only
// frame headers and the timeout are added per request.
type grpcTemplate struct {
	authority, service string
	// tls: the request goes over TLS (grpc.mode TLS), so its :scheme is
	// https, as grpc-go sends it over TLS credentials.
	tls           bool
	headers, data []byte
	// listSize is the request's header list size as HTTP/2 counts it,
	// grpc-timeout included at its longest.
	listSize int64
}

// maxTemplatePayload keeps both frames within HTTP/2's default maximum frame
// size and the peer's initial flow control window; larger requests (absurdly
// long service names) take grpc-go's path.
const maxTemplatePayload = 16 << 10

// newGRPCTemplate encodes the headers grpc-go sends for a unary call, in its
// order. A dynamic table size update to 0 opens the block and no field is
// indexed, so the block does not depend on any connection's HPACK state and
// can be sent again and again on one connection.
func newGRPCTemplate(authority, service, userAgent string, useTLS bool) *grpcTemplate {
	scheme := "http"
	if useTLS {
		scheme = "https"
	}
	var buf bytes.Buffer
	enc := hpack.NewEncoder(&buf)
	enc.SetMaxDynamicTableSizeLimit(0)
	size := int64(hpack.HeaderField{Name: "grpc-timeout", Value: "12345678m"}.Size())
	for _, f := range [...]hpack.HeaderField{
		{Name: ":method", Value: "POST"},
		{Name: ":scheme", Value: scheme},
		{Name: ":path", Value: "/grpc.health.v1.Health/Check"},
		{Name: ":authority", Value: authority},
		{Name: "content-type", Value: "application/grpc"},
		{Name: "user-agent", Value: userAgent},
		{Name: "te", Value: "trailers"},
	} {
		_ = enc.WriteField(f) // writes to a bytes.Buffer never fail
		size += int64(f.Size())
	}
	var msg []byte
	if service != "" { // proto3 omits an empty string field
		msg = protowire.AppendTag(msg, 1, protowire.BytesType)
		msg = protowire.AppendString(msg, service)
	}
	data := make([]byte, 5, 5+len(msg))
	binary.BigEndian.PutUint32(data[1:], uint32(len(msg)))
	return &grpcTemplate{authority: authority, service: service, tls: useTLS, headers: buf.Bytes(), data: append(data, msg...), listSize: size}
}

func (t *grpcTemplate) fits() bool {
	return len(t.headers)+32 <= maxTemplatePayload && len(t.data) <= maxTemplatePayload
}

// appendGRPCTimeout appends grpc-timeout as an HPACK literal without
// indexing, with the value grpc-go's encoder would give (at most 8 digits,
// rounded up, the finest unit that fits).
func appendGRPCTimeout(b []byte, d time.Duration) []byte {
	var v [16]byte
	val := encodeGRPCTimeout(v[:0], d)
	b = append(b, 0x00, byte(len("grpc-timeout")))
	b = append(b, "grpc-timeout"...)
	b = append(b, byte(len(val)))
	return append(b, val...)
}

func encodeGRPCTimeout(b []byte, t time.Duration) []byte {
	const maxValue = 100000000 - 1
	if t <= 0 {
		return append(b, "0n"...)
	}
	for _, u := range [...]struct {
		d time.Duration
		c byte
	}{{time.Nanosecond, 'n'}, {time.Microsecond, 'u'}, {time.Millisecond, 'm'}, {time.Second, 'S'}, {time.Minute, 'M'}} {
		if v := int64((t + u.d - 1) / u.d); v <= maxValue {
			return append(strconv.AppendInt(b, v, 10), u.c)
		}
	}
	return append(strconv.AppendInt(b, int64((t+time.Hour-1)/time.Hour), 10), 'H')
}
