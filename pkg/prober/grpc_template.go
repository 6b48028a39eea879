package prober

import (
	"bytes"
	"strconv"
	"sync"
	"time"

	"golang.org/x/net/http2/hpack"
	"google.golang.org/protobuf/encoding/protowire"
)

// grpcTemplate is the constant part of one health RPC: the HPACK-encoded
// request headers (without grpc-timeout, which changes per probe) and the
// DATA payload, the 5-byte gRPC prefix and the HealthCheckRequest. Only
// frame headers and the timeout are added per request.
type grpcTemplate struct {
	authority, service string
	headers, data      []byte
}

// maxTemplatePayload keeps both frames within HTTP/2's default maximum frame
// size and the peer's initial flow control window; larger requests (absurdly
// long service names) take grpc-go's path.
const maxTemplatePayload = 16 << 10

// newGRPCTemplate encodes the headers grpc-go sends for a unary call, in its
// order. A dynamic table size update to 0 opens the block and no field is
// indexed, so the block does not depend on any connection's HPACK state and
// can be sent again and again on one connection.
func newGRPCTemplate(authority, service, userAgent string) *grpcTemplate {
	var buf bytes.Buffer
	enc := hpack.NewEncoder(&buf)
	enc.SetMaxDynamicTableSizeLimit(0)
	for _, f := range [...]hpack.HeaderField{
		{Name: ":method", Value: "POST"},
		{Name: ":scheme", Value: "http"},
		{Name: ":path", Value: "/grpc.health.v1.Health/Check"},
		{Name: ":authority", Value: authority},
		{Name: "content-type", Value: "application/grpc"},
		{Name: "user-agent", Value: userAgent},
		{Name: "te", Value: "trailers"},
	} {
		_ = enc.WriteField(f) // writes to a bytes.Buffer never fail
	}
	var msg []byte
	if service != "" { // proto3 omits an empty string field
		msg = protowire.AppendTag(msg, 1, protowire.BytesType)
		msg = protowire.AppendString(msg, service)
	}
	data := make([]byte, 5, 5+len(msg))
	data[1], data[2], data[3], data[4] = byte(len(msg)>>24), byte(len(msg)>>16), byte(len(msg)>>8), byte(len(msg))
	return &grpcTemplate{authority: authority, service: service, headers: buf.Bytes(), data: append(data, msg...)}
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

// templateCache holds templates for probes without a Session. It is small
// and simply forgets everything when full (pod IPs come and go).
type templateCache struct {
	mu sync.Mutex
	m  map[[2]string]*grpcTemplate
}

const templateCacheMax = 1024

func (c *templateCache) get(authority, service, userAgent string) *grpcTemplate {
	key := [2]string{authority, service}
	c.mu.Lock()
	defer c.mu.Unlock()
	if t, ok := c.m[key]; ok {
		return t
	}
	if c.m == nil || len(c.m) >= templateCacheMax {
		c.m = make(map[[2]string]*grpcTemplate)
	}
	t := newGRPCTemplate(authority, service, userAgent)
	c.m[key] = t
	return t
}
