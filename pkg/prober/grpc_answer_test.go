package prober

import (
	"context"
	"strings"
	"testing"

	"google.golang.org/grpc"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/metadata"
	"google.golang.org/protobuf/encoding/protowire"
)

// paddedHealth answers SERVING with padding: in its headers, its trailers
// or the message itself (an unknown field, which a decoder skips).
type paddedHealth struct {
	healthpb.UnimplementedHealthServer
	header, trailer, message int
}

func (h paddedHealth) Check(ctx context.Context, _ *healthpb.HealthCheckRequest) (*healthpb.HealthCheckResponse, error) {
	if h.header > 0 {
		_ = grpc.SetHeader(ctx, metadata.Pairs("x-pad", strings.Repeat("p", h.header)))
	}
	if h.trailer > 0 {
		_ = grpc.SetTrailer(ctx, metadata.Pairs("x-pad", strings.Repeat("p", h.trailer)))
	}
	resp := &healthpb.HealthCheckResponse{Status: healthpb.HealthCheckResponse_SERVING}
	if h.message > 0 {
		pad := protowire.AppendTag(nil, 1000, protowire.BytesType)
		resp.ProtoReflect().SetUnknown(protowire.AppendBytes(pad, make([]byte, h.message)))
	}
	return resp, nil
}

// Issue 30, item 2: a gRPC probe reads at most MaxResponseHeaderBytes of
// headers or trailers and maxGRPCAnswerBytes of message, where grpc-go's
// defaults (the kubelet's) are 16 MiB and 4 MiB: a larger answer fails the
// probe, in grpc-go's words. A grpc-go server learns the header limit from
// the probe's SETTINGS and resets the stream instead of sending; a server
// that sends anyway is cut off by the probe (test/kubeletparity,
// TestOversizeAnswersDeviateFromTheKubelet). Within the limits, a padded
// answer passes.
func TestGRPCAnswerIsBounded(t *testing.T) {
	const refused = "rpc error: code = Internal desc = stream terminated by RST_STREAM with error code: INTERNAL_ERROR"
	for _, tc := range []struct {
		name string
		h    paddedHealth
		want Result
		out  string
	}{
		{"headers within the limit", paddedHealth{header: 16 << 10}, Success, "service healthy"},
		{"1 MiB of headers", paddedHealth{header: 1 << 20}, Failure, refused},
		{"1 MiB of trailers", paddedHealth{trailer: 1 << 20}, Failure, refused},
		{"a message within the limit", paddedHealth{message: 8 << 10}, Success, "service healthy"},
		{"a 1 MiB message", paddedHealth{message: 1 << 20}, Failure, "grpc: received message larger than max"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			port := startGRPC(t, func(s *grpc.Server) { healthpb.RegisterHealthServer(s, tc.h) })
			res, out, err := New(nil, Options{}).runOnce(context.Background(), grpcSpec(port, ""), Target{PodIP: "127.0.0.1"})
			if res != tc.want || err != nil || !strings.Contains(out, tc.out) {
				t.Errorf("got %s %q %v; want %s saying %q", res, out, err, tc.want, tc.out)
			}
		})
	}
}
