package prober

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"io"
	"math"
	"net"
	"sync"
	"time"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/protobuf/encoding/protowire"
)

// h2conn is a minimal HTTP/2 client connection for the fast gRPC health
// check: one stream at a time, driven entirely by the probing goroutine.
// Its buffers, framer and HPACK decoder are pooled across connections.
type h2conn struct {
	conn net.Conn
	br   *bufio.Reader
	fr   *http2.Framer
	dec  *hpack.Decoder
	wbuf []byte

	nextStream uint32
	// ready is set once the server's SETTINGS arrived: the point where
	// grpc-go reports the channel Ready, which decides the timeout text.
	ready bool
	// unacked is response DATA not yet returned to the connection's flow
	// control window; only a kept connection ever sends it back.
	unacked uint32

	// The current stream's response.
	stream        uint32
	blocks        int // header blocks completed
	status200     bool
	grpcContent   bool
	grpcStatusOK  bool
	grpcStatusSet bool
	// deadlineStatus: the answer carried grpc-status 4 (DEADLINE_EXCEEDED),
	// which the kubelet reports as the RPC timeout whoever's clock ran out.
	deadlineStatus bool
	// answer is the ServingStatus of a well-formed OK answer, else -1.
	answer     int32
	msg        []byte
	msgTooLong bool
}

var (
	errH2Unexpected = errors.New("unexpected HTTP/2 frame")
	errH2GoAway     = errors.New("server sent GOAWAY")
	errH2Reset      = errors.New("server reset the stream")
)

// maxHealthResponse bounds what is kept of a response message; a
// HealthCheckResponse is 2 bytes plus unknown fields, if any.
const maxHealthResponse = 64

var h2Pool = sync.Pool{New: func() any {
	c := &h2conn{br: bufio.NewReaderSize(nil, 4096)}
	c.fr = http2.NewFramer(io.Discard, c.br)
	c.fr.SetReuseFrames()
	c.fr.SetMaxReadFrameSize(16 << 10) // the default we advertise
	c.dec = hpack.NewDecoder(4096, c.onField)
	c.dec.SetMaxStringLength(16 << 10)
	return c
}}

// newH2Conn wraps a fresh TCP connection; nothing is sent yet.
func newH2Conn(conn net.Conn) *h2conn {
	c := h2Pool.Get().(*h2conn)
	c.conn = conn
	c.br.Reset(conn)
	c.nextStream = 1
	c.ready = false
	c.unacked = 0
	return c
}

// close closes the connection. When clean, the last exchange ended on a
// frame boundary and the rest can serve another connection.
func (c *h2conn) close(clean bool) {
	_ = c.conn.Close()
	c.conn = nil
	if !clean {
		return
	}
	c.br.Reset(nil)
	// Empty the dynamic table: the next connection starts afresh.
	c.dec.SetMaxDynamicTableSize(0)
	c.dec.SetMaxDynamicTableSize(4096)
	h2Pool.Put(c)
}

// clientPreface is the connection preface and an empty SETTINGS frame.
var clientPreface = append([]byte(http2.ClientPreface), 0, 0, 0, byte(http2.FrameSettings), 0, 0, 0, 0, 0)

func appendFrameHeader(b []byte, length int, t http2.FrameType, flags http2.Flags, stream uint32) []byte {
	b = append(b, byte(length>>16), byte(length>>8), byte(length), byte(t), byte(flags))
	return binary.BigEndian.AppendUint32(b, stream&(1<<31-1))
}

// check sends one Health/Check on a new stream and reads until that
// stream ends. healthy is true only for a well-formed SERVING answer with
// grpc-status 0; false with a nil error is any other complete answer, which
// c.answer and c.deadlineStatus describe when they can. The
// connection's deadline bounds it; the caller sets it.
func (c *h2conn) check(t *grpcTemplate, deadline time.Time) (healthy bool, err error) {
	if c.nextStream > 1<<31-1 {
		return false, errH2GoAway // out of stream IDs: the caller reconnects
	}
	c.stream = c.nextStream
	c.nextStream += 2
	c.blocks, c.msg, c.msgTooLong = 0, c.msg[:0], false
	c.status200, c.grpcContent, c.grpcStatusOK, c.grpcStatusSet = false, false, false, false
	c.deadlineStatus, c.answer = false, -1

	b := c.wbuf[:0]
	if c.stream == 1 {
		b = append(b, clientPreface...)
	}
	if c.unacked > 0 {
		b = appendFrameHeader(b, 4, http2.FrameWindowUpdate, 0, 0)
		b = binary.BigEndian.AppendUint32(b, c.unacked)
		c.unacked = 0
	}
	hdrAt := len(b)
	b = appendFrameHeader(b, 0, http2.FrameHeaders, http2.FlagHeadersEndHeaders, c.stream)
	b = append(b, t.headers...)
	if !deadline.IsZero() {
		b = appendGRPCTimeout(b, time.Until(deadline))
	}
	n := len(b) - hdrAt - 9
	b[hdrAt], b[hdrAt+1], b[hdrAt+2] = byte(n>>16), byte(n>>8), byte(n)
	b = appendFrameHeader(b, len(t.data), http2.FrameData, http2.FlagDataEndStream, c.stream)
	b = append(b, t.data...)
	c.wbuf = b
	if _, err := c.conn.Write(b); err != nil {
		return false, err
	}

	for {
		f, err := c.fr.ReadFrame()
		if err != nil {
			return false, err
		}
		var ended bool
		switch f := f.(type) {
		case *http2.SettingsFrame:
			if !f.IsAck() {
				c.ready = true
				if err := c.write(appendFrameHeader(c.wbuf[:0], 0, http2.FrameSettings, http2.FlagSettingsAck, 0)); err != nil {
					return false, err
				}
			}
		case *http2.PingFrame:
			if !f.IsAck() {
				b := appendFrameHeader(c.wbuf[:0], 8, http2.FramePing, http2.FlagPingAck, 0)
				if err := c.write(append(b, f.Data[:]...)); err != nil {
					return false, err
				}
			}
		case *http2.WindowUpdateFrame, *http2.PriorityFrame:
		case *http2.HeadersFrame:
			if f.StreamID != c.stream {
				return false, errH2Unexpected
			}
			if err := c.headerBlock(f.HeaderBlockFragment(), f.HeadersEnded()); err != nil {
				return false, err
			}
			ended = f.StreamEnded()
		case *http2.ContinuationFrame:
			if f.StreamID != c.stream {
				return false, errH2Unexpected
			}
			if err := c.headerBlock(f.HeaderBlockFragment(), f.HeadersEnded()); err != nil {
				return false, err
			}
		case *http2.DataFrame:
			if f.StreamID != c.stream {
				return false, errH2Unexpected
			}
			c.unacked += f.Length
			if d := f.Data(); len(c.msg)+len(d) <= maxHealthResponse {
				c.msg = append(c.msg, d...)
			} else {
				c.msgTooLong = true
			}
			ended = f.StreamEnded()
		case *http2.GoAwayFrame:
			return false, errH2GoAway
		case *http2.RSTStreamFrame:
			return false, errH2Reset
		default:
			return false, errH2Unexpected
		}
		if ended {
			// Trailers must have arrived with the END_STREAM, or the stream is
			// not a complete gRPC response.
			if c.blocks == 2 && c.status200 && c.grpcContent && c.grpcStatusOK && !c.msgTooLong {
				if st, ok := servingStatus(c.msg); ok && st <= math.MaxInt32 {
					c.answer = int32(st)
				}
			}
			return c.answer == int32(healthpb.HealthCheckResponse_SERVING), nil
		}
	}
}

func (c *h2conn) write(b []byte) error {
	_, err := c.conn.Write(b)
	return err
}

func (c *h2conn) headerBlock(frag []byte, end bool) error {
	if _, err := c.dec.Write(frag); err != nil {
		return err
	}
	if end {
		c.blocks++
		return c.dec.Close()
	}
	return nil
}

// onField sees every decoded response header and trailer.
func (c *h2conn) onField(f hpack.HeaderField) {
	switch f.Name {
	case ":status":
		c.status200 = c.blocks == 0 && f.Value == "200"
	case "content-type":
		v := f.Value
		c.grpcContent = c.blocks == 0 && len(v) >= 16 && v[:16] == "application/grpc" && (len(v) == 16 || v[16] == '+' || v[16] == ';')
	case "grpc-status":
		c.grpcStatusOK = c.blocks == 1 && !c.grpcStatusSet && f.Value == "0"
		c.deadlineStatus = !c.grpcStatusSet && f.Value == "4"
		c.grpcStatusSet = true
	}
}

// servingStatus decodes one length-prefixed, uncompressed
// HealthCheckResponse into its status, as protobuf would.
func servingStatus(msg []byte) (uint64, bool) {
	if len(msg) < 5 || msg[0] != 0 || int(binary.BigEndian.Uint32(msg[1:5])) != len(msg)-5 {
		return 0, false
	}
	b := msg[5:]
	status := uint64(0) // UNKNOWN when absent
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return 0, false
		}
		b = b[n:]
		if num == 1 && typ == protowire.VarintType {
			v, n := protowire.ConsumeVarint(b)
			if n < 0 {
				return 0, false
			}
			status, b = v, b[n:]
			continue
		}
		if n = protowire.ConsumeFieldValue(num, typ, b); n < 0 {
			return 0, false
		}
		b = b[n:]
	}
	return status, true
}

// dialH2 opens the TCP connection through the probe dialer, so the host
// guard judges it like any other probe connection.
func dialH2(ctx context.Context, d *net.Dialer, addr string) (*h2conn, error) {
	conn, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, err
	}
	return newH2Conn(conn), nil
}
