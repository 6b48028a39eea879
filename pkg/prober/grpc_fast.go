package prober

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"
	"time"

	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"k8s.io/klog/v2"
)

// probe runs one gRPC health check with a new connection.
func (p *grpcProber) probe(ctx context.Context, host, service string, port int, timeout time.Duration) (Result, string, error) {
	return p.probeSession(ctx, nil, false, host, service, port, timeout)
}

// probeSession tries the fast path first: a hand-rolled HTTP/2 exchange
// that reads only well-formed answers with grpc-status OK (the service's
// status) or DEADLINE_EXCEEDED. Anything else is asked again through
// grpc-go (probeGRPCGo), within what is left of the timeout, so every
// failure reads exactly as the kubelet writes it; that costs a second
// connection only on those failures.
//
// A fast path that runs out of time reports the timeout itself, with the
// text grpc-go gives at the same point: before the server's SETTINGS (where
// grpc-go's channel becomes Ready) it is the connect timeout, after it the
// RPC timeout. A fallback then would have no time left anyway.
//
// With keepAlive and a session, the connection is kept for the worker's
// next probe; a kept connection that fails is replaced by a new one within
// the same probe.
func (p *grpcProber) probeSession(ctx context.Context, s *Session, keepAlive bool, host, service string, port int, timeout time.Duration) (Result, string, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	addr := net.JoinHostPort(host, strconv.Itoa(port))
	if p.noFast {
		return p.probeGRPCGo(ctx, addr, service, timeout)
	}

	healthy, ready, err := p.fastCheck(ctx, s.grpcState(), keepAlive, addr, service)
	if healthy {
		return Success, "service healthy", nil
	}
	var ua unhealthyAnswer
	if errors.As(err, &ua) {
		return Failure, ua.Error(), nil
	}
	// The connection's I/O deadline is the context's, and may fire a moment
	// before the context's own timer: a fallback then has no time left.
	deadline, _ := ctx.Deadline()
	timedOut := errors.Is(ctx.Err(), context.DeadlineExceeded) ||
		ctx.Err() == nil && err != nil && !time.Now().Before(deadline)
	if timedOut || errors.Is(err, errRPCDeadline) {
		if !ready {
			klog.V(4).InfoS("gRPC probe could not connect in time", "addr", addr, "service", service, "timeout", timeout, "err", err)
			return Failure, fmt.Sprintf("timeout: failed to connect service %q within %v: %+v", addr, timeout, context.DeadlineExceeded), nil
		}
		return Failure, fmt.Sprintf("timeout: health rpc did not complete within %v", timeout), nil
	}
	klog.V(5).InfoS("gRPC fast path gave no healthy answer, asking grpc-go", "addr", addr, "service", service, "err", err)
	return p.probeGRPCGo(ctx, addr, service, timeout)
}

var (
	// errNotHealthy stands for a complete answer other than SERVING.
	errNotHealthy = errors.New("not a healthy answer")
	// errRPCDeadline is a complete answer with status DEADLINE_EXCEEDED (the
	// handler ran out of the grpc-timeout we sent, or of a deadline of its
	// own). grpc-go maps it to the RPC timeout text, and it comes near our
	// own deadline, too late for a fallback to connect.
	errRPCDeadline = errors.New("server answered DEADLINE_EXCEEDED")
)

// unhealthyAnswer is a well-formed OK answer with a status other than
// SERVING: its text needs nothing from grpc-go.
type unhealthyAnswer healthpb.HealthCheckResponse_ServingStatus

func (a unhealthyAnswer) Error() string {
	return fmt.Sprintf("service unhealthy (responded with %q)", healthpb.HealthCheckResponse_ServingStatus(a).String())
}

// answerErr names a complete answer other than SERVING.
func (c *h2conn) answerErr() error {
	switch {
	case c.deadlineStatus:
		return errRPCDeadline
	case c.answer >= 0:
		return unhealthyAnswer(c.answer)
	}
	return errNotHealthy
}

// fastCheck reports whether addr answered SERVING, and whether a
// connection got as far as the server's SETTINGS.
func (p *grpcProber) fastCheck(ctx context.Context, gs *grpcSession, keepAlive bool, addr, service string) (healthy, ready bool, err error) {
	var t *grpcTemplate
	if gs != nil {
		t = gs.template(addr, service, p.userAgent)
	} else {
		t = p.templates.get(addr, service, p.userAgent)
	}
	if !t.fits() {
		return false, false, errors.New("request too large for the fast path")
	}
	keep := keepAlive && gs != nil
	if keep {
		if c := gs.take(addr); c != nil {
			healthy, err := p.exchange(ctx, c, t)
			if err == nil {
				gs.keep(addr, c)
				if healthy {
					return true, true, nil
				}
				return false, true, c.answerErr()
			}
			c.close(false)
			if ctx.Err() != nil {
				return false, true, err
			}
			klog.V(5).InfoS("Kept gRPC connection failed, reconnecting", "addr", addr, "err", err)
		}
	}
	c, err := dialH2(ctx, p.dialer, addr)
	if err != nil {
		return false, false, err
	}
	healthy, err = p.exchange(ctx, c, t)
	ready = c.ready
	failed := err != nil
	if !failed && !healthy {
		err = c.answerErr() // before close returns c to the pool
	}
	switch {
	case failed:
		c.close(false)
	case keep:
		gs.keep(addr, c)
	default:
		c.close(true)
	}
	return healthy, ready, err
}

// exchange runs one check on c, bounded by ctx: its deadline becomes the
// connection's, and a cancellation cuts the connection's I/O short.
func (p *grpcProber) exchange(ctx context.Context, c *h2conn, t *grpcTemplate) (bool, error) {
	deadline, _ := ctx.Deadline()
	if err := c.conn.SetDeadline(deadline); err != nil {
		return false, err
	}
	conn := c.conn // the callback may outlive this call, and c
	stop := context.AfterFunc(ctx, func() { _ = conn.SetDeadline(time.Unix(1, 0)) })
	healthy, err := c.check(t, deadline)
	if !stop() {
		// Cancelled: the I/O may have been cut mid-frame.
		if err == nil {
			err = ctx.Err()
		}
	}
	return healthy, err
}
