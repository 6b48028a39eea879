package prober

import (
	"context"
	"errors"
	"fmt"
	"net"
	"slices"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/connectivity"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"
	"k8s.io/klog/v2"
)

// grpcProber calls grpc.health.v1.Health/Check over a fresh plaintext
// connection per probe, like the kubelet and grpc_health_probe. Every
// outcome is a (Failure|Success, message, nil): the messages are the
// kubelet's, word for word, since users read them in events.
type grpcProber struct {
	// opts are immutable and shared by all probes.
	opts []grpc.DialOption
	// guarded is set when a host guard checks connections: the dialer then
	// needs the probe's scope, which gRPC's own dial context does not
	// carry, so each probe adds a dialer that brings it along.
	guarded bool
	dialer  *net.Dialer

	// noFast sends every probe through grpc-go (--probe-fast-paths=false).
	noFast bool

	// userAgent is what grpc-go sends: ours, then its own.
	userAgent string
	templates templateCache
}

func newGRPCProber(userAgent string, guard *HostGuard) *grpcProber {
	dialer := newGuardedDialer(guard)
	p := &grpcProber{dialer: dialer, guarded: guard.active(), userAgent: userAgent + " grpc-go/" + grpc.Version, opts: []grpc.DialOption{
		grpc.WithUserAgent(userAgent),
		// Probes carry no credentials, as in the kubelet.
		grpc.WithTransportCredentials(insecure.NewCredentials()),
	}}
	if !p.guarded {
		p.opts = append(p.opts, grpc.WithContextDialer(func(ctx context.Context, addr string) (net.Conn, error) {
			return dialer.DialContext(ctx, "tcp", addr)
		}))
	}
	return p
}

// probeGRPCGo is the probe on grpc-go, whose outcomes and texts are the
// kubelet's. addr is host:port.
func (p *grpcProber) probeGRPCGo(ctx context.Context, addr, service string, timeout time.Duration) (Result, string, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()

	conn, err := p.connect(ctx, addr)
	if err != nil {
		if isRefused(err) {
			return Unknown, "", err
		}
		if errors.Is(err, context.DeadlineExceeded) {
			klog.V(4).InfoS("gRPC probe could not connect in time", "addr", addr, "service", service, "timeout", timeout, "err", err)
			return Failure, fmt.Sprintf("timeout: failed to connect service %q within %v: %+v", addr, timeout, err), nil
		}
		klog.V(4).InfoS("gRPC probe could not connect", "addr", addr, "service", service, "err", err)
		return Failure, fmt.Sprintf("error: failed to connect service at %q: %+v", addr, err), nil
	}
	defer func() { _ = conn.Close() }()

	resp, err := healthpb.NewHealthClient(conn).Check(ctx, &healthpb.HealthCheckRequest{Service: service})
	if err != nil {
		if st, ok := status.FromError(err); ok {
			switch st.Code() {
			case codes.Unimplemented:
				return Failure, fmt.Sprintf("error: this server does not implement the grpc health protocol (grpc.health.v1.Health): %s", st.Message()), nil
			case codes.DeadlineExceeded:
				return Failure, fmt.Sprintf("timeout: health rpc did not complete within %v", timeout), nil
			}
		}
		klog.V(4).InfoS("gRPC health check failed", "addr", addr, "service", service, "err", err)
		return Failure, fmt.Sprintf("error: health rpc probe failed: %+v", err), nil
	}
	if resp.GetStatus() != healthpb.HealthCheckResponse_SERVING {
		return Failure, fmt.Sprintf("service unhealthy (responded with %q)", resp.GetStatus().String()), nil
	}
	return Success, "service healthy", nil
}

// connect opens a connection and waits until it is ready or ctx ends. It
// reproduces what the kubelet gets from the deprecated grpc.DialContext with
// WithBlock: a refused or silent port keeps the channel retrying until the
// deadline, and the error is then the bare context error. The passthrough
// scheme hands the address to the dialer as is, again like DialContext.
func (p *grpcProber) connect(ctx context.Context, addr string) (*grpc.ClientConn, error) {
	opts := p.opts
	if p.guarded {
		// The last dialer option wins; p.opts has none when guarded.
		probeCtx := ctx
		opts = append(slices.Clip(p.opts), grpc.WithContextDialer(func(dialCtx context.Context, addr string) (net.Conn, error) {
			return p.dialer.DialContext(copyDialScope(dialCtx, probeCtx), "tcp", addr)
		}))
	}
	conn, err := grpc.NewClient("passthrough:///"+addr, opts...)
	if err != nil {
		return nil, err
	}
	for {
		s := conn.GetState()
		switch s {
		case connectivity.Ready:
			return conn, nil
		case connectivity.Idle:
			conn.Connect()
		}
		if !conn.WaitForStateChange(ctx, s) {
			_ = conn.Close()
			return nil, ctx.Err()
		}
	}
}
