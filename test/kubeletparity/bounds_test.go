package kubeletparity

import (
	"fmt"
	"strings"
	"testing"

	"golang.org/x/net/http2"
	v1 "k8s.io/api/core/v1"

	"github.com/probed-dev/probed/pkg/prober"
)

// continued writes a HEADERS frame whose block goes on in CONTINUATION
// frames of the default maximum frame size.
func (w *h2Writer) continued(stream uint32, kv ...string) {
	block := w.block(kv...)
	const max = 16 << 10
	first := block[:min(len(block), max)]
	block = block[len(first):]
	_ = w.fr.WriteHeaders(http2.HeadersFrameParam{StreamID: stream, BlockFragment: first, EndHeaders: len(block) == 0})
	for len(block) > 0 {
		part := block[:min(len(block), max)]
		block = block[len(part):]
		_ = w.fr.WriteContinuation(stream, len(block) == 0, part)
	}
}

// TestOversizeAnswersDeviateFromTheKubelet: the documented deviation of
// issue 30, item 2. For an answer whose head (or gRPC message) is larger
// than probed reads, the kubelet reads it all (net/http's 10 MB of
// headers, grpc-go's 16 MiB of header list and 4 MiB of message) and the
// probe passes; probed stops at prober.MaxResponseHeaderBytes (or 16 KiB
// of gRPC message) and the probe fails, saying why. The servers here
// ignore what the client advertises, as a hostile one would.
func TestOversizeAnswersDeviateFromTheKubelet(t *testing.T) {
	t.Parallel()
	var pad strings.Builder
	for i := 0; pad.Len() < 1<<20; i++ {
		fmt.Fprintf(&pad, "X-Pad-%d: %s\r\n", i, strings.Repeat("p", 1000))
	}
	big := strings.Repeat("p", 1<<20)
	// A SERVING answer behind a 32 KiB unknown field (field 2, bytes).
	padded := append([]byte{0x12, 0x80, 0x80, 0x02}, make([]byte, 32<<10)...)
	padded = append(padded, 0x08, 1)
	for _, tc := range []struct {
		name     string
		spec     func() (*v1.Probe, func() int32)
		kubelet  string // the kubelet's result
		probedIs string // what probed's output ends in
	}{
		{"HTTP/1.1, 1 MiB of headers", func() (*v1.Probe, func() int32) {
			srv := startRaw(t, false, reply("HTTP/1.1 200 OK\r\n"+pad.String()+"Content-Length: 2\r\n\r\nok"))
			return httpSpec(srv.port, "/hz", 2), srv.reqs.Load
		}, "success", fmt.Sprintf("net/http: server response headers exceeded %d bytes; aborted", prober.MaxResponseHeaderBytes)},
		{"gRPC, 40 KiB of headers", func() (*v1.Probe, func() int32) {
			srv := startH2Script(t, h2Script{answer: func(w *h2Writer, id uint32, _ int) scriptEnd {
				kv := []string{":status", "200", "content-type", "application/grpc"}
				for i := range 40 {
					kv = append(kv, fmt.Sprintf("x-pad-%d", i), strings.Repeat("p", 1000))
				}
				w.continued(id, kv...)
				w.data(id, false, grpcMsg(0x08, 1))
				w.trailers(id, "0")
				return scriptOn
			}})
			return grpcSpec(srv.port, "", false), srv.requests.Load
		}, "success", "rpc error: code = Internal desc = peer header list size exceeded limit"},
		// Far over, x/net's framer ends the connection at once, with an error
		// that cannot say why.
		{"gRPC, a 1 MiB header", func() (*v1.Probe, func() int32) {
			srv := startH2Script(t, h2Script{answer: func(w *h2Writer, id uint32, _ int) scriptEnd {
				w.continued(id, ":status", "200", "content-type", "application/grpc", "x-pad", big)
				w.data(id, false, grpcMsg(0x08, 1))
				w.trailers(id, "0")
				return scriptOn
			}})
			return grpcSpec(srv.port, "", false), srv.requests.Load
		}, "success", "rpc error: code = Unavailable desc = error reading from server: connection error: COMPRESSION_ERROR"},
		{"gRPC, a 32 KiB message", func() (*v1.Probe, func() int32) {
			srv := startH2Script(t, h2Script{answer: func(w *h2Writer, id uint32, _ int) scriptEnd {
				w.grpcOK(id)
				msg := grpcMsg(padded...)
				w.data(id, false, msg[:16<<10])
				w.data(id, false, msg[16<<10:32<<10])
				w.data(id, false, msg[32<<10:])
				w.trailers(id, "0")
				return scriptOn
			}})
			return grpcSpec(srv.port, "", false), srv.requests.Load
		}, "success", fmt.Sprintf("rpc error: code = ResourceExhausted desc = grpc: received message larger than max (%d vs. 16384)", len(padded))},
		// Over both limits, both fail, each naming its own.
		{"gRPC, a 5 MiB message", func() (*v1.Probe, func() int32) {
			srv := startH2Script(t, h2Script{answer: func(w *h2Writer, id uint32, _ int) scriptEnd {
				w.grpcOK(id)
				w.data(id, false, []byte{0, 0, 0x50, 0, 0})
				return scriptOn
			}})
			return grpcSpec(srv.port, "", false), srv.requests.Load
		}, "failure", "rpc error: code = ResourceExhausted desc = grpc: received message larger than max (5242880 vs. 16384)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			spec, _ := tc.spec()
			k := kubeletProbe(spec, &v1.Container{Name: "app"}, "127.0.0.1")
			p := probedProbe(spec, &v1.Container{Name: "app"}, "127.0.0.1", prober.Options{})
			t.Logf("kubelet: %v\nprobed:  %v", k, p)
			if k.result != tc.kubelet {
				t.Errorf("the kubelet's result %v, want %s", k, tc.kubelet)
			}
			if p.result != "failure" || !strings.HasSuffix(p.output, tc.probedIs) {
				t.Errorf("probed: %v; want a failure ending in %q", p, tc.probedIs)
			}
		})
	}
}
