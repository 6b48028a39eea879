package prober

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"os"
	"slices"
	"strconv"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/connectivity"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"
	"k8s.io/klog/v2"
)

// grpcProber calls grpc.health.v1.Health/Check over a fresh plaintext
// connection per probe, like the kubelet and grpc_health_probe, or over TLS
// without certificate verification for grpc.mode TLS (KEP-4939). Every
// outcome is a (Failure|Success, message, nil): the messages are the
// kubelet's, word for word, since users read them in events.
//
// A probe takes the fast path (grpc_h2.go): one goroutine, one HTTP/2
// connection, the request from a template. It sends each request once.
// Until the server's first SETTINGS frame nothing of the request is
// written, and a connection that fails there (a dead port, a server that
// is not HTTP/2, settings grpc-go would wait on) hands the probe to grpc-go
// (probeGRPCGo, the kubelet's code) within the same timeout. From the
// request on, the fast path judges the answer itself by grpc-go's rules,
// so results and texts are grpc-go's on the same bytes.
type grpcProber struct {
	// opts are immutable and shared by all probes; tlsOpts are the same
	// with TLS credentials (grpc.mode TLS), tlsCreds those credentials.
	opts, tlsOpts []grpc.DialOption
	tlsCreds      credentials.TransportCredentials
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
	// KEP-4939's semantics: TLS, and no verification of the certificate
	// (the kubelet dials the pod IP, which no certificate names).
	p.tlsCreds = credentials.NewTLS(&tls.Config{InsecureSkipVerify: true}) //nolint:gosec // upstream parity
	p.tlsOpts = append(slices.Clip(p.opts), grpc.WithTransportCredentials(p.tlsCreds))
	return p
}

// dialOpts are the options for a probe over plaintext or TLS.
func (p *grpcProber) dialOpts(useTLS bool) []grpc.DialOption {
	if useTLS {
		return p.tlsOpts
	}
	return p.opts
}

// probe runs one gRPC health check with a new connection.
func (p *grpcProber) probe(ctx context.Context, host, service string, port int, timeout time.Duration) (Result, string, error) {
	return p.probeSession(ctx, nil, false, host, service, port, timeout)
}

// probeSession runs one health check. With keepAlive and a session, the
// connection is kept for the worker's next probe.
func (p *grpcProber) probeSession(ctx context.Context, s *Session, keepAlive bool, host, service string, port int, timeout time.Duration) (Result, string, error) {
	return p.probeTLS(ctx, s, keepAlive, false, host, service, port, timeout)
}

// probeTLS runs one health check, over TLS when useTLS (grpc.mode TLS).
func (p *grpcProber) probeTLS(ctx context.Context, s *Session, keepAlive, useTLS bool, host, service string, port int, timeout time.Duration) (Result, string, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	addr := net.JoinHostPort(host, strconv.Itoa(port))
	if p.noFast {
		return p.probeGRPCGoTLS(ctx, addr, service, timeout, useTLS)
	}
	gs := s.grpcState()
	var t *grpcTemplate
	if gs != nil {
		t = gs.template(addr, service, p.userAgent, useTLS)
	} else {
		t = p.templates.get(addr, service, p.userAgent, useTLS)
	}
	if !t.fits() {
		return p.probeGRPCGoTLS(ctx, addr, service, timeout, useTLS)
	}
	ans, ready, err := p.fastCall(ctx, gs, keepAlive && gs != nil, addr, t)
	if err == nil {
		return rpcOutcome(addr, service, timeout, ans.serving, ans.err)
	}
	// Nothing of the request was written.
	if timedOut(ctx, err) {
		// grpc-go would be out of time too. Before the server's SETTINGS its
		// channel is not Ready: the connect timeout.
		if !ready {
			return connectOutcome(addr, service, timeout, ctxErr(ctx))
		}
		return rpcOutcome(addr, service, timeout, 0, status.Error(codes.DeadlineExceeded, context.DeadlineExceeded.Error()))
	}
	if ctx.Err() != nil {
		return connectOutcome(addr, service, timeout, ctx.Err())
	}
	klog.V(5).InfoS("gRPC fast path sent nothing, asking grpc-go", "addr", addr, "service", service, "tls", useTLS, "err", err)
	return p.probeGRPCGoTLS(ctx, addr, service, timeout, useTLS)
}

// fastCall runs the check on the fast path. A non-nil err means nothing of
// the request was written (ready: the server's SETTINGS had arrived).
//
// The request goes out a second time only where grpc-go's own call would
// send it again: once, when the server says it never processed the stream
// (RST_STREAM REFUSED_STREAM, or a GOAWAY below it: grpc-go's transparent
// retry). And a kept connection that fails with nothing at all received
// for the request is replaced within the probe: a server that dropped it
// while idle, which grpc-go's channel would have noticed and reconnected
// before the call (a server that read the request and hung up without a
// word looks the same, and gets it again).
func (p *grpcProber) fastCall(ctx context.Context, gs *grpcSession, keep bool, addr string, t *grpcTemplate) (ans rpcAnswer, ready bool, err error) {
	var c *h2conn
	if keep {
		c = gs.take(addr)
	}
	retried := false
	for {
		fresh := c == nil
		if !fresh && !c.canSend(t) {
			c.close(false)
			c, fresh = nil, true
		}
		if fresh {
			if c, ready, err = p.open(ctx, addr, t); err != nil {
				if retried && timedOut(ctx, err) {
					// The retry's wait for a new connection, inside the call.
					return rpcAnswer{err: status.Error(codes.DeadlineExceeded, context.DeadlineExceeded.Error())}, true, nil
				}
				return rpcAnswer{}, ready, err
			}
		}
		ans = c.call(ctx, t)
		switch {
		case !fresh && ans.idleDeath && ctx.Err() == nil:
			klog.V(5).InfoS("Kept gRPC connection was gone, reconnecting", "addr", addr)
		case ans.unprocessed && !retried && ctx.Err() == nil:
			klog.V(5).InfoS("gRPC server did not process the check, retrying once as grpc-go does", "addr", addr, "err", ans.err)
			retried = true
			if c.canSend(t) {
				continue // a refused stream: the same connection
			}
		default:
			if keep && ans.clean {
				c.release()
				gs.keep(addr, c)
			} else {
				c.close(ans.clean)
			}
			return ans, true, nil
		}
		c.close(false)
		c = nil
	}
}

// open dials addr and reads the server's first SETTINGS; ready says
// whether they came. On an error the connection is closed.
func (p *grpcProber) open(ctx context.Context, addr string, t *grpcTemplate) (c *h2conn, ready bool, err error) {
	var creds credentials.TransportCredentials
	if t.tls {
		creds = p.tlsCreds
	}
	c, err = dialH2(ctx, p.dialer, addr, creds)
	if err != nil {
		return nil, false, err
	}
	c.watch(ctx)
	err = c.handshake()
	if err == nil && !c.canSend(t) {
		err = errors.New("server settings hold the request back")
	}
	if err != nil {
		c.close(false)
		return nil, c.ready, err
	}
	return c, true, nil
}

// timedOut: the probe's time is up, or the connection's deadline (the
// context's) fired a moment before the context's own timer.
func timedOut(ctx context.Context, err error) bool {
	if errors.Is(ctx.Err(), context.DeadlineExceeded) || errors.Is(err, os.ErrDeadlineExceeded) {
		return true
	}
	deadline, ok := ctx.Deadline()
	return ok && ctx.Err() == nil && !time.Now().Before(deadline)
}

// ctxErr is the context's error, taking a deadline that has passed as
// exceeded before the context's timer says so.
func ctxErr(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	return context.DeadlineExceeded
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
func rpcOutcome(addr, service string, timeout time.Duration, serving int32, err error) (Result, string, error) {
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
	if st := healthpb.HealthCheckResponse_ServingStatus(serving); st != healthpb.HealthCheckResponse_SERVING {
		return Failure, fmt.Sprintf("service unhealthy (responded with %q)", st.String()), nil
	}
	return Success, "service healthy", nil
}

// probeGRPCGo is the probe on grpc-go, whose outcomes and texts are the
// kubelet's. addr is host:port.
func (p *grpcProber) probeGRPCGo(ctx context.Context, addr, service string, timeout time.Duration) (Result, string, error) {
	return p.probeGRPCGoTLS(ctx, addr, service, timeout, false)
}

// probeGRPCGoTLS is probeGRPCGo, over TLS when useTLS.
func (p *grpcProber) probeGRPCGoTLS(ctx context.Context, addr, service string, timeout time.Duration, useTLS bool) (Result, string, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()

	conn, err := p.connect(ctx, addr, useTLS)
	if err != nil {
		if isRefused(err) {
			return Unknown, "", err
		}
		return connectOutcome(addr, service, timeout, err)
	}
	defer func() { _ = conn.Close() }()

	resp, err := healthpb.NewHealthClient(conn).Check(ctx, &healthpb.HealthCheckRequest{Service: service})
	return rpcOutcome(addr, service, timeout, int32(resp.GetStatus()), err)
}

// connect opens a connection and waits until it is ready or ctx ends. It
// reproduces what the kubelet gets from the deprecated grpc.DialContext with
// WithBlock: a refused or silent port keeps the channel retrying until the
// deadline, and the error is then the bare context error. The passthrough
// scheme hands the address to the dialer as is, again like DialContext.
func (p *grpcProber) connect(ctx context.Context, addr string, useTLS bool) (*grpc.ClientConn, error) {
	opts := p.dialOpts(useTLS)
	if p.guarded {
		// The last dialer option wins; p.opts has none when guarded.
		probeCtx := ctx
		opts = append(slices.Clip(opts), grpc.WithContextDialer(func(dialCtx context.Context, addr string) (net.Conn, error) {
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

// templateCache holds templates for probes without a Session. It is small
// and simply forgets everything when full (pod IPs come and go).
type templateCache struct {
	mu sync.Mutex
	m  map[templateKey]*grpcTemplate
}

type templateKey struct {
	authority, service string
	tls                bool
}

const templateCacheMax = 1024

func (c *templateCache) get(authority, service, userAgent string, useTLS bool) *grpcTemplate {
	key := templateKey{authority, service, useTLS}
	c.mu.Lock()
	defer c.mu.Unlock()
	if t, ok := c.m[key]; ok {
		return t
	}
	if c.m == nil || len(c.m) >= templateCacheMax {
		c.m = make(map[templateKey]*grpcTemplate)
	}
	t := newGRPCTemplate(authority, service, userAgent, useTLS)
	c.m[key] = t
	return t
}

// grpcSession is the gRPC probe's per-worker state: the request template
// of the worker's last probe and, for a probe with keep-alive, its
// connection.
type grpcSession struct {
	mu     sync.Mutex
	closed bool
	tmpl   *grpcTemplate
	// conn is the kept connection to addr; nil while a probe uses it.
	conn *h2conn
	addr string
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

func (g *grpcSession) template(authority, service, userAgent string, useTLS bool) *grpcTemplate {
	g.mu.Lock()
	defer g.mu.Unlock()
	if t := g.tmpl; t != nil && t.authority == authority && t.service == service && t.tls == useTLS {
		return t
	}
	g.tmpl = newGRPCTemplate(authority, service, userAgent, useTLS)
	return g.tmpl
}

// take hands over the kept connection to addr, if any. A connection to
// another address is closed: the worker's target moved.
func (g *grpcSession) take(addr string) *h2conn {
	g.mu.Lock()
	defer g.mu.Unlock()
	c := g.conn
	g.conn = nil
	if c != nil && g.addr != addr {
		c.close(false)
		return nil
	}
	return c
}

// keep stores c for the next probe, or closes it when the session was
// closed meanwhile or already holds one.
func (g *grpcSession) keep(addr string, c *h2conn) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.closed || g.conn != nil {
		c.close(false)
		return
	}
	g.conn, g.addr = c, addr
}

func (g *grpcSession) close() {
	if g == nil {
		return
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	g.closed = true
	if g.conn != nil {
		g.conn.close(false)
		g.conn = nil
	}
}
