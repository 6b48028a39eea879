// Package endpoints serves probed's own HTTP endpoints: /metrics, /healthz,
// /readyz and /debug/probes.
package endpoints

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"k8s.io/klog/v2"
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
	// Probes returns the /debug/probes document.
	Probes func() any
}

// Handler builds the endpoints' mux.
func Handler(o Options) http.Handler {
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(o.Gatherer, promhttp.HandlerOpts{ErrorHandling: promhttp.ContinueOnError}))
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) {
		fmt.Fprintln(w, "ok")
	})
	mux.HandleFunc("/readyz", func(w http.ResponseWriter, r *http.Request) {
		ctx, cancel := context.WithTimeout(r.Context(), 2*time.Second)
		defer cancel()
		failed := false
		var body []byte
		for _, c := range o.Ready {
			if err := c.Fn(ctx); err != nil {
				failed = true
				body = fmt.Appendf(body, "[-] %s: %v\n", c.Name, err)
				continue
			}
			body = fmt.Appendf(body, "[+] %s ok\n", c.Name)
		}
		if failed {
			w.WriteHeader(http.StatusServiceUnavailable)
		}
		_, _ = w.Write(body)
	})
	mux.HandleFunc("/debug/probes", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		var doc any = []any{}
		if o.Probes != nil {
			doc = o.Probes()
		}
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		if err := enc.Encode(doc); err != nil {
			klog.ErrorS(err, "Encoding /debug/probes")
		}
	})
	return mux
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
	srv := &http.Server{Handler: Handler(o), ReadHeaderTimeout: 10 * time.Second}
	go func() {
		<-ctx.Done()
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(sctx)
	}()
	klog.InfoS("Serving endpoints", "address", ln.Addr().String())
	if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}
