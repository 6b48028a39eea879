// Package endpoints serves probed's own HTTP endpoints: /metrics, /healthz,
// /readyz and /debug/probes.
//
// /healthz and /readyz are open; /readyz says which checks fail, not why.
// /metrics, /debug/ and /readyz?verbose are served over TLS and need a
// bearer token that the API server authenticates and authorizes for the
// path (Auth), as Kubernetes components do. Plain HTTP with no
// authentication is a development option (Insecure), on loopback only.
package endpoints

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"golang.org/x/net/netutil"
	"k8s.io/klog/v2"

	"github.com/probed-dev/probed/pkg/worker"
)

// Check reports why probed is not ready, or nil.
type Check struct {
	Name string
	Fn   func(ctx context.Context) error
}

// Options configures the endpoints.
type Options struct {
	Addr     string
	Gatherer prometheus.Gatherer
	// Ready checks must all pass for /readyz to answer 200.
	Ready []Check
	// Probes returns every worker's snapshot, for /debug/probes.
	Probes func() []worker.Snapshot
	// Auth guards /metrics and /debug/. Required unless Insecure.
	Auth *Auth
	// Cert is the TLS serving certificate.
	Cert ServingCert
	// Insecure serves plain HTTP with no authentication at all. Only for
	// development, and only on a loopback address (CheckInsecureAddr).
	Insecure bool
	// MaxConnections caps open connections (DefaultMaxConnections when 0).
	MaxConnections int
	// MaxConnectionsPerSource caps one remote address's open connections
	// (DefaultMaxConnectionsPerSource when 0).
	MaxConnectionsPerSource int
	// IdleTimeout closes idle keep-alive connections (DefaultIdleTimeout when 0).
	IdleTimeout time.Duration
	// ReadHeaderTimeout closes a connection whose TLS handshake and request
	// head take longer (DefaultReadHeaderTimeout when 0).
	ReadHeaderTimeout time.Duration
	// HealthAddr, a loopback address, serves /healthz and /readyz alone, in
	// plain HTTP, for the kubelet's probes: nothing else reaches it, so no
	// caller of the main address can starve them. Empty: none.
	HealthAddr string
}

// Handler builds the endpoints' mux. /metrics and /debug/ go through
// o.Auth unless o.Insecure.
func Handler(o Options) (http.Handler, error) {
	h, _, err := handlers(o)
	return h, err
}

// handlers builds the main mux and the health mux (/healthz and /readyz
// without ?verbose); they share the readiness checks' state.
func handlers(o Options) (main, health http.Handler, err error) {
	guard := func(h http.Handler) http.Handler { return h }
	metricsGuard := guard
	switch {
	case o.Insecure:
	case o.Auth == nil:
		return nil, nil, errors.New("/metrics and /debug/ need authentication and authorization (or the insecure development mode)")
	default:
		guard = o.Auth.guard(o.Auth.Authenticator)
		metricsGuard = guard
		if o.Auth.MetricsAuthenticator != nil {
			metricsGuard = o.Auth.guard(o.Auth.MetricsAuthenticator)
		}
	}
	healthz := http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		fmt.Fprintln(w, "ok")
	})
	rd := &readiness{checks: o.Ready}
	mux := http.NewServeMux()
	mux.Handle("/metrics", metricsGuard(promhttp.HandlerFor(o.Gatherer, promhttp.HandlerOpts{ErrorHandling: promhttp.ContinueOnError})))
	mux.Handle("/healthz", healthz)
	mux.Handle("/readyz", rd.handler(guard))
	// Everything under /debug/ is guarded, known path or not.
	debug := http.NewServeMux()
	debug.Handle("/debug/probes", debugProbes(o.Probes))
	mux.Handle("/debug/", guard(debug))

	hmux := http.NewServeMux()
	hmux.Handle("/healthz", healthz)
	hmux.Handle("/readyz", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { rd.serve(w, r, false) }))
	return mux, hmux, nil
}

// CheckInsecureAddr refuses plain HTTP on anything but a loopback address:
// probed runs on the host network, so any other address is the node's.
func CheckInsecureAddr(addr string) error {
	return checkLoopback(addr, "plain HTTP without authentication is for development on 127.0.0.1 or [::1] only")
}

// CheckHealthAddr refuses a health address that is not a loopback one: it
// serves plain HTTP, and is the kubelet's alone.
func CheckHealthAddr(addr string) error {
	return checkLoopback(addr, "the health listener serves plain HTTP to the kubelet, on 127.0.0.1 or [::1] only")
}

func checkLoopback(addr, why string) error {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("%q: %w", addr, err)
	}
	if ip := net.ParseIP(host); ip == nil || !ip.IsLoopback() {
		return fmt.Errorf("%q is not a loopback address: %s", addr, why)
	}
	return nil
}

// Serve listens on o.Addr, and on o.HealthAddr if set, and serves until ctx
// is done.
func Serve(ctx context.Context, o Options) error {
	var health net.Listener
	if o.HealthAddr != "" {
		if err := CheckHealthAddr(o.HealthAddr); err != nil {
			return fmt.Errorf("health address: %w", err)
		}
		ln, err := net.Listen("tcp", o.HealthAddr)
		if err != nil {
			return fmt.Errorf("listening on %s: %w", o.HealthAddr, err)
		}
		health = ln
	}
	ln, err := net.Listen("tcp", o.Addr)
	if err != nil {
		if health != nil {
			health.Close()
		}
		return fmt.Errorf("listening on %s: %w", o.Addr, err)
	}
	return ServeListeners(ctx, ln, health, o)
}

// ServeListener serves on ln until ctx is done.
func ServeListener(ctx context.Context, ln net.Listener, o Options) error {
	return ServeListeners(ctx, ln, nil, o)
}

// ServeListeners serves the endpoints on ln and, if health is not nil,
// /healthz and /readyz on health (a loopback address, plain HTTP), until ctx
// is done or either fails.
func ServeListeners(ctx context.Context, ln, health net.Listener, o Options) error {
	defer ln.Close()
	if health != nil {
		defer health.Close()
		if err := CheckHealthAddr(health.Addr().String()); err != nil {
			return fmt.Errorf("health address: %w", err)
		}
	}
	h, hh, err := handlers(o)
	if err != nil {
		return err
	}
	idle := orDefault(o.IdleTimeout, DefaultIdleTimeout)
	readHeader := orDefault(o.ReadHeaderTimeout, DefaultReadHeaderTimeout)
	ln = netutil.LimitListener(limitPerSource(ln, orDefault(o.MaxConnectionsPerSource, DefaultMaxConnectionsPerSource)),
		orDefault(o.MaxConnections, DefaultMaxConnections))
	srv := &http.Server{Handler: h, ReadHeaderTimeout: readHeader, IdleTimeout: idle, MaxHeaderBytes: maxHeaderBytes, ErrorLog: serverLog()}
	ctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	defer wg.Wait()
	defer cancel()
	scheme := "http"
	if o.Insecure {
		if err := CheckInsecureAddr(ln.Addr().String()); err != nil {
			return err
		}
		klog.InfoS("Serving endpoints over plain HTTP without authentication (development mode)", "address", ln.Addr().String())
	} else {
		if srv.TLSConfig, err = servingTLS(ctx, o.Cert, &wg); err != nil {
			return err
		}
		// A non-nil, empty map turns HTTP/2 off (see servingTLS).
		srv.TLSNextProto = map[string]func(*http.Server, *tls.Conn, http.Handler){}
		scheme = "https"
	}
	servers := []*http.Server{srv}
	errs := make(chan error, 2)
	if health != nil {
		hsrv := &http.Server{Handler: hh, ReadHeaderTimeout: readHeader, IdleTimeout: idle, MaxHeaderBytes: maxHeaderBytes, ErrorLog: serverLog()}
		servers = append(servers, hsrv)
		klog.InfoS("Serving health endpoints", "address", health.Addr().String(), "scheme", "http")
		go func() { errs <- hsrv.Serve(health) }()
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		<-ctx.Done()
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		for _, s := range servers {
			_ = s.Shutdown(sctx)
		}
	}()
	klog.InfoS("Serving endpoints", "address", ln.Addr().String(), "scheme", scheme, "selfSigned", !o.Insecure && o.Cert.CertFile == "")
	go func() {
		if scheme == "https" {
			errs <- srv.ServeTLS(ln, "", "")
		} else {
			errs <- srv.Serve(ln)
		}
	}()
	// The first to stop stops the other; ErrServerClosed is a shutdown.
	var first error
	for range servers {
		if err := <-errs; err != nil && !errors.Is(err, http.ErrServerClosed) && first == nil {
			first = err
		}
		cancel()
	}
	return first
}

// serverLog takes net/http's own messages, such as a TLS handshake error
// for each socket that closes or times out before its handshake (anyone
// who reaches the port can cause one), to klog at verbosity 4.
func serverLog() *log.Logger { return log.New(klogV4{}, "", 0) }

type klogV4 struct{}

func (klogV4) Write(p []byte) (int, error) {
	klog.V(4).InfoS("Endpoint server", "message", strings.TrimSpace(string(p)))
	return len(p), nil
}

// orDefault is v, or def when v is not positive.
func orDefault[T int | time.Duration](v, def T) T {
	if v <= 0 {
		return def
	}
	return v
}
