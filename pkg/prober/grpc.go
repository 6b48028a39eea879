package prober

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"slices"
	"strconv"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/connectivity"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"
	v1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"

	"github.com/probed-dev/probed/pkg/hostpolicy"
)

// grpcProber calls grpc.health.v1.Health/Check through grpc-go as the
// kubelet's pkg/probe/grpc does: a connection that blocks until it is ready
// (or the timeout), over plaintext, or over TLS without verifying the
// certificate for grpc.mode TLS (KEP-4939), with the kubelet's user agent,
// and closed after the probe. Every outcome is (Failure|Success, message,
// nil) in the kubelet's words, since users read them in events; only a
// connection the host policy refuses is an error. With "probed.io/keepAlive"
// the worker's Session keeps the ClientConn for its next probe.
type grpcProber struct {
	guard     *hostpolicy.Guard
	userAgent *UserAgent
	// plain and tls are the dial options of every probe, without the
	// dialer, which is per probe (bound to the probed pod's scope), and
	// the user agent, which may change (the node's kubelet is upgraded).
	plain, tls []grpc.DialOption
	// common are the options of every probe, for one with probed.io/tls.
	common []grpc.DialOption
	// tlsSrc builds the Config of a probe with probed.io/tls.
	tlsSrc *tlsSource
}

func newGRPCProber(userAgent *UserAgent, guard *hostpolicy.Guard, tlsSrc *tlsSource) *grpcProber {
	// What an answer may hold of probed's memory; the kubelet keeps
	// grpc-go's 16 MiB of headers and 4 MiB message.
	common := []grpc.DialOption{grpc.WithMaxHeaderListSize(MaxResponseHeaderBytes),
		grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(maxGRPCAnswerBytes))}
	return &grpcProber{
		guard:     guard,
		userAgent: userAgent,
		// Probes carry no credentials, as in the kubelet.
		plain: append(slices.Clip(common), grpc.WithTransportCredentials(insecure.NewCredentials())),
		// KEP-4939: TLS, and no verification (the kubelet dials the pod IP,
		// which no certificate names).
		tls:    append(slices.Clip(common), grpc.WithTransportCredentials(credentials.NewTLS(&tls.Config{InsecureSkipVerify: true}))), //nolint:gosec // upstream parity
		common: common,
		tlsSrc: tlsSrc,
	}
}

// run carries out one grpc probe. It has no host field: it always dials
// the pod IP, which the host policy still checks (an empty one would reach
// this node).
func (p *grpcProber) run(ctx context.Context, action *v1.GRPCAction, target Target, timeout time.Duration) (Result, string, error) {
	service := ""
	if action.Service != nil {
		service = *action.Service
	}
	useTLS := action.Mode != nil && *action.Mode == v1.GRPCProbeModeTLS
	tlsCfg, verified, err := p.tlsSrc.config(target)
	if err != nil {
		return Unknown, "", err
	}
	useTLS = useTLS || verified
	sc := scopeOf(p.guard, target)
	if err := sc.checkHost(target.PodIP); err != nil {
		return Unknown, "", err
	}
	if v := klog.V(4); v.Enabled() {
		v.InfoS("gRPC probe", "host", target.PodIP, "port", action.Port, "service", service, "timeout", timeout, "tls", useTLS, "keepAlive", target.KeepAlive)
	}
	var s *Session
	if target.KeepAlive {
		s = target.Session
	}
	return p.check(ctx, s, sc, dialTLS{on: useTLS, cfg: tlsCfg}, target.PodIP, service, int(action.Port), timeout)
}

// dialTLS is how a gRPC probe dials: plaintext, the kubelet's unverified
// TLS, or, with cfg, probed.io/tls's.
type dialTLS struct {
	on  bool
	cfg *tls.Config
}

// check runs one health check of host:port on a new connection, or on the
// connection s keeps (s is nil unless the probe keeps its connection).
func (p *grpcProber) check(ctx context.Context, s *Session, sc scope, useTLS dialTLS, host, service string, port int, timeout time.Duration) (Result, string, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	addr := net.JoinHostPort(host, strconv.Itoa(port))
	req := &healthpb.HealthCheckRequest{Service: service}

	// A kept connection is kept for one address in one namespace: a
	// replaced sandbox has a new one behind the same loopback address.
	key := addr
	if sc.ns != nil {
		key += " in " + sc.ns.ID().String()
	}
	conn, creds := s.takeGRPC(key, useTLS)
	kept := conn != nil
	if !kept {
		var err error
		if conn, creds, err = p.dial(sc, useTLS, addr); err != nil {
			return connectOutcome(addr, service, timeout, err)
		}
	}
	if err := awaitReady(ctx, conn, creds.certificateError); err != nil {
		_ = conn.Close()
		return connectOutcome(addr, service, timeout, err)
	}
	resp, err := healthpb.NewHealthClient(conn).Check(ctx, req)
	if kept && status.Code(err) == codes.Unavailable && ctx.Err() == nil {
		// The kept connection died while idle (a restarted server) before
		// grpc-go noticed: within the probe, what a probe without
		// keep-alive would have done, on a new connection.
		klog.V(5).InfoS("Kept gRPC connection was gone, reconnecting", "addr", addr, "err", err)
		_ = conn.Close()
		return p.check(ctx, s, sc, useTLS, host, service, port, timeout)
	}
	if s != nil {
		s.keepGRPC(key, useTLS, conn, creds)
	} else {
		_ = conn.Close()
	}
	return rpcOutcome(addr, service, timeout, resp.GetStatus(), err)
}

// dial makes the ClientConn of one probe, its dialer bound to sc; creds
// are probed.io/tls's, nil for the kubelet's TLS or plaintext.
func (p *grpcProber) dial(sc scope, useTLS dialTLS, addr string) (_ *grpc.ClientConn, creds *handshakeCreds, _ error) {
	opts := p.plain
	switch {
	case useTLS.cfg != nil:
		creds = newHandshakeCreds(useTLS.cfg)
		opts = append(slices.Clip(p.common), grpc.WithTransportCredentials(creds))
	case useTLS.on:
		opts = p.tls
	}
	dial := sc.dial(true)
	opts = append(slices.Clip(opts), grpc.WithUserAgent(p.userAgent.Probe()), grpc.WithContextDialer(func(ctx context.Context, addr string) (net.Conn, error) {
		return dial(ctx, "tcp", addr)
	}))
	conn, err := grpc.NewClient("passthrough:///"+addr, opts...)
	return conn, creds, err
}

// awaitReady waits until conn is ready or ctx ends, as the kubelet's
// grpc.DialContext with WithBlock does (the same loop, on the
// non-deprecated NewClient): a refused or silent port keeps the channel
// retrying until the deadline, and the error is then the bare context
// error. The passthrough scheme hands the address to the dialer as is,
// again like DialContext.
//
// failed, when it returns an error in TRANSIENT_FAILURE, ends the wait
// with it: a certificate that does not verify (probed.io/tls).
func awaitReady(ctx context.Context, conn *grpc.ClientConn, failed func() error) error {
	for {
		s := conn.GetState()
		switch s {
		case connectivity.Ready:
			return nil
		case connectivity.Idle:
			conn.Connect()
		case connectivity.TransientFailure:
			if err := failed(); err != nil {
				return err
			}
		}
		if !conn.WaitForStateChange(ctx, s) {
			return ctx.Err()
		}
	}
}

// connectOutcome words a connection that never became ready, as the
// kubelet does.
func connectOutcome(addr, service string, timeout time.Duration, err error) (Result, string, error) {
	if errors.Is(err, context.DeadlineExceeded) {
		klog.V(4).InfoS("gRPC probe could not connect in time", "addr", addr, "service", service, "timeout", timeout, "err", err)
		return Failure, fmt.Sprintf("timeout: failed to connect service %q within %v: %+v", addr, timeout, err), nil
	}
	klog.V(4).InfoS("gRPC probe could not connect", "addr", addr, "service", service, "err", err)
	return Failure, fmt.Sprintf("error: failed to connect service at %q: %+v", addr, err), nil
}

// rpcOutcome words the Check call's outcome as the kubelet does: err is
// the call's error, else serving is the answer.
func rpcOutcome(addr, service string, timeout time.Duration, serving healthpb.HealthCheckResponse_ServingStatus, err error) (Result, string, error) {
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
	if serving != healthpb.HealthCheckResponse_SERVING {
		return Failure, fmt.Sprintf("service unhealthy (responded with %q)", serving.String()), nil
	}
	return Success, "service healthy", nil
}

// grpcState returns the session's gRPC state, or nil for a nil or closed
// Session.
func (s *Session) grpcState() *grpcSession {
	if s == nil {
		return nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil
	}
	if s.grpc == nil {
		s.grpc = &grpcSession{}
	}
	return s.grpc
}

// takeGRPC hands over the kept ClientConn to addr, if there is one that
// has not failed; a probe that takes it gives it back with keepGRPC. A
// ClientConn to another address, or in TRANSIENT_FAILURE, is closed: the
// probe dials anew, as the kubelet does for every probe. creds are the
// ClientConn's probed.io/tls credentials, which it keeps using when it
// connects again.
func (s *Session) takeGRPC(addr string, useTLS dialTLS) (*grpc.ClientConn, *handshakeCreds) {
	g := s.grpcState()
	if g == nil {
		return nil, nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	c, creds := g.conn, g.creds
	g.conn, g.creds = nil, nil
	if c == nil {
		return nil, nil
	}
	if g.addr != addr || g.useTLS != useTLS.on || g.tls != useTLS.cfg || c.GetState() == connectivity.TransientFailure {
		_ = c.Close()
		return nil, nil
	}
	return c, creds
}

// keepGRPC keeps c for the worker's next probe, or closes it when the
// session is closed or nil.
func (s *Session) keepGRPC(addr string, useTLS dialTLS, c *grpc.ClientConn, creds *handshakeCreds) {
	g := s.grpcState()
	if g == nil {
		_ = c.Close()
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed || g.conn != nil {
		_ = c.Close()
		return
	}
	g.conn, g.addr, g.useTLS, g.tls, g.creds = c, addr, useTLS.on, useTLS.cfg, creds
}
