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
	"net"
	"net/http"
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
	// IdleTimeout closes idle keep-alive connections (DefaultIdleTimeout when 0).
	IdleTimeout time.Duration
	// MaxUnauthenticatedInFlight caps guarded requests not yet authorized;
	// more get 429 (DefaultMaxUnauthenticatedInFlight when 0).
	MaxUnauthenticatedInFlight int
}

// Handler builds the endpoints' mux. /metrics and /debug/ go through
// o.Auth unless o.Insecure.
func Handler(o Options) (http.Handler, error) {
	guard := func(h http.Handler) http.Handler { return h }
	switch {
	case o.Insecure:
	case o.Auth == nil:
		return nil, errors.New("/metrics and /debug/ need authentication and authorization (or the insecure development mode)")
	default:
		guard = o.Auth.guard(int64(orDefault(o.MaxUnauthenticatedInFlight, DefaultMaxUnauthenticatedInFlight)))
	}
	mux := http.NewServeMux()
	mux.Handle("/metrics", guard(promhttp.HandlerFor(o.Gatherer, promhttp.HandlerOpts{ErrorHandling: promhttp.ContinueOnError})))
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) {
		fmt.Fprintln(w, "ok")
	})
	mux.Handle("/readyz", (&readiness{checks: o.Ready}).handler(guard))
	// Everything under /debug/ is guarded, known path or not.
	debug := http.NewServeMux()
	debug.Handle("/debug/probes", debugProbes(o.Probes))
	mux.Handle("/debug/", guard(debug))
	return mux, nil
}

// CheckInsecureAddr refuses plain HTTP on anything but a loopback address:
// probed runs on the host network, so any other address is the node's.
func CheckInsecureAddr(addr string) error {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("%q: %w", addr, err)
	}
	if ip := net.ParseIP(host); ip == nil || !ip.IsLoopback() {
		return fmt.Errorf("%q is not a loopback address: plain HTTP without authentication is for development on 127.0.0.1 or [::1] only", addr)
	}
	return nil
}

// Serve listens on o.Addr and serves until ctx is done.
func Serve(ctx context.Context, o Options) error {
	ln, err := net.Listen("tcp", o.Addr)
	if err != nil {
		return fmt.Errorf("listening on %s: %w", o.Addr, err)
	}
	return ServeListener(ctx, ln, o)
}

// ServeListener serves on ln until ctx is done.
func ServeListener(ctx context.Context, ln net.Listener, o Options) error {
	defer ln.Close()
	h, err := Handler(o)
	if err != nil {
		return err
	}
	ln = netutil.LimitListener(ln, orDefault(o.MaxConnections, DefaultMaxConnections))
	srv := &http.Server{
		Handler:           h,
		ReadHeaderTimeout: readHeaderTimeout,
		IdleTimeout:       orDefault(o.IdleTimeout, DefaultIdleTimeout),
		MaxHeaderBytes:    maxHeaderBytes,
	}
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
	wg.Add(1)
	go func() {
		defer wg.Done()
		<-ctx.Done()
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(sctx)
	}()
	klog.InfoS("Serving endpoints", "address", ln.Addr().String(), "scheme", scheme, "selfSigned", !o.Insecure && o.Cert.CertFile == "")
	if scheme == "https" {
		err = srv.ServeTLS(ln, "", "")
	} else {
		err = srv.Serve(ln)
	}
	if err != nil && !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

// orDefault is v, or def when v is not positive.
func orDefault[T int | time.Duration](v, def T) T {
	if v <= 0 {
		return def
	}
	return v
}
