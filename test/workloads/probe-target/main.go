// Command probe-target is the workload that probed's end-to-end tier and demo
// probe. One static binary, configured by flags, stands in for the agnhost
// "liveness", "test-webserver" and "grpc-health-checking" programs that the
// Kubernetes "Probing container" tests use, plus a few behaviours the demo needs:
//
//	HTTP (--http):
//	  /                   200 "ok" (a plain web server)
//	  /healthz            200 "ok"; 500 once --healthz-fail-after has passed since
//	                      start, while --fail-file exists, or after POST /fail
//	  /readyz             200 "ready" or 503 "not ready": not ready before
//	                      --ready-after, during the "down" half of --ready-flip,
//	                      while --unready-file exists, and once SIGTERM arrived
//	  /redirect?loc=URL   302 Found to URL (local: "/healthz"; non-local: "http://0.0.0.0/")
//	  /fail, /recover     POST: make /healthz fail, or healthy again
//	  --h2c               also HTTP/2 cleartext with prior knowledge on the same
//	                      listener (as upstream's h2c test server)
//	TCP (--tcp):          accepts connections and closes them
//	gRPC (--grpc):        grpc.health.v1.Health; service "" follows /healthz,
//	                      service "ready" follows /readyz
//	  --grpc-tls          over TLS, with a self-signed certificate made at start
//	                      (as agnhost's --tls-cert-file for the gRPC TLS tests),
//	                      or --tls-dir's
//	HTTPS (--https):      the HTTP endpoints over TLS (HTTP/2 and HTTP/1.1), with
//	                      --tls-dir's certificate or a self-signed one
//	--tls-dir DIR         the certificate of --https and --grpc-tls: DIR/tls.crt and
//	                      DIR/tls.key, as a kubernetes.io/tls Secret's volume has
//	                      them. They are re-read when they change (the kubelet
//	                      swaps the volume's ..data symlink): each handshake stats
//	                      the files, and a change takes effect from that handshake on.
//	--tls-require-client-cert
//	                      refuse TLS clients without a certificate that DIR/ca.crt
//	                      verifies (re-read with the rest), and log each accepted
//	                      one's subject CN: one line per handshake
//
// --start-delay postpones every listener, for slow starters behind a startup
// probe. On SIGTERM it turns unready, waits --term-delay, and exits 0.
package main

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"errors"
	"flag"
	"fmt"
	"log"
	"math/big"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/signal"
	"sync/atomic"
	"syscall"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
)

type config struct {
	httpAddr         string
	tcpAddr          string
	grpcAddr         string
	startDelay       time.Duration
	healthzFailAfter time.Duration
	failFile         string
	readyAfter       time.Duration
	readyFlip        time.Duration
	unreadyFile      string
	termDelay        time.Duration
	h2c              bool
	grpcTLS          bool
	httpsAddr        string
	tlsDir           string
	requireClient    bool
}

func main() {
	var c config
	flag.StringVar(&c.httpAddr, "http", ":8080", "HTTP listen address; empty disables HTTP")
	flag.StringVar(&c.tcpAddr, "tcp", "", "plain TCP listen address (accept and close); empty disables it")
	flag.StringVar(&c.grpcAddr, "grpc", "", "gRPC health server listen address; empty disables it")
	flag.DurationVar(&c.startDelay, "start-delay", 0, "open no listener until this long after start (a slow starter)")
	flag.DurationVar(&c.healthzFailAfter, "healthz-fail-after", 0, "/healthz fails once this long has passed since start; 0 never")
	flag.StringVar(&c.failFile, "fail-file", "", "/healthz fails while this file exists")
	flag.DurationVar(&c.readyAfter, "ready-after", 0, "/readyz is not ready until this long after start")
	flag.DurationVar(&c.readyFlip, "ready-flip", 0, "/readyz alternates ready and not ready every this long; 0 always ready")
	flag.StringVar(&c.unreadyFile, "unready-file", "", "/readyz is not ready while this file exists")
	flag.DurationVar(&c.termDelay, "term-delay", 0, "on SIGTERM, stay up (unready) this long before exiting")
	flag.BoolVar(&c.h2c, "h2c", false, "serve HTTP/2 cleartext (prior knowledge) besides HTTP/1.1 on --http")
	flag.BoolVar(&c.grpcTLS, "grpc-tls", false, "serve --grpc over TLS (--tls-dir's certificate, or a self-signed one)")
	flag.StringVar(&c.httpsAddr, "https", "", "HTTPS listen address (the HTTP endpoints over TLS); empty disables it")
	flag.StringVar(&c.tlsDir, "tls-dir", "", "directory with tls.crt and tls.key (and ca.crt) for --https and --grpc-tls, re-read when they change")
	flag.BoolVar(&c.requireClient, "tls-require-client-cert", false, "TLS listeners require a client certificate that --tls-dir's ca.crt verifies")
	flag.Parse()
	log.SetFlags(log.LstdFlags | log.Lmicroseconds)
	log.SetPrefix("probe-target: ")
	if err := run(c); err != nil {
		log.Fatal(err)
	}
}

// target holds the health state every endpoint reports from.
type target struct {
	cfg         config
	started     time.Time
	forcedFail  atomic.Bool
	terminating atomic.Bool
	// certs serves --tls-dir's certificate; nil without --tls-dir.
	certs *certDir
}

// healthy reports the liveness state and why it is unhealthy.
func (t *target) healthy() (bool, string) {
	switch {
	case t.cfg.healthzFailAfter > 0 && time.Since(t.started) > t.cfg.healthzFailAfter:
		return false, fmt.Sprintf("error: unhealthy %.1fs after start", time.Since(t.started).Seconds())
	case t.forcedFail.Load():
		return false, "error: failed on request"
	case t.cfg.failFile != "" && exists(t.cfg.failFile):
		return false, "error: " + t.cfg.failFile + " exists"
	}
	return true, "ok"
}

// ready reports the readiness state and why it is not ready.
func (t *target) ready() (bool, string) {
	up := time.Since(t.started)
	switch {
	case t.terminating.Load():
		return false, "not ready: terminating"
	case up < t.cfg.readyAfter:
		return false, fmt.Sprintf("not ready: warming up (%.0fs of %.0fs)", up.Seconds(), t.cfg.readyAfter.Seconds())
	case t.cfg.readyFlip > 0 && int64((up-t.cfg.readyAfter)/t.cfg.readyFlip)%2 == 1:
		return false, "not ready: in the down half of the flip cycle"
	case t.cfg.unreadyFile != "" && exists(t.cfg.unreadyFile):
		return false, "not ready: " + t.cfg.unreadyFile + " exists"
	}
	return true, "ready"
}

func exists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}

func (t *target) mux() *http.ServeMux {
	m := http.NewServeMux()
	m.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/" {
			http.NotFound(w, r)
			return
		}
		fmt.Fprintln(w, "ok")
	})
	m.HandleFunc("/healthz", func(w http.ResponseWriter, r *http.Request) {
		ok, msg := t.healthy()
		if !ok {
			w.WriteHeader(http.StatusInternalServerError)
		}
		fmt.Fprint(w, msg)
	})
	m.HandleFunc("/readyz", func(w http.ResponseWriter, r *http.Request) {
		ok, msg := t.ready()
		if !ok {
			w.WriteHeader(http.StatusServiceUnavailable)
		}
		fmt.Fprint(w, msg)
	})
	// As agnhost's: the location is taken from ?loc= (query-unescaped) and
	// answered with 302 Found, whose body the kubelet quotes in ProbeWarning.
	m.HandleFunc("/redirect", func(w http.ResponseWriter, r *http.Request) {
		loc, err := url.QueryUnescape(r.URL.Query().Get("loc"))
		if err != nil || loc == "" {
			http.Error(w, "missing or invalid loc", http.StatusBadRequest)
			return
		}
		http.Redirect(w, r, loc, http.StatusFound)
	})
	m.HandleFunc("POST /fail", func(w http.ResponseWriter, r *http.Request) {
		t.forcedFail.Store(true)
		fmt.Fprintln(w, "/healthz now fails")
	})
	m.HandleFunc("POST /recover", func(w http.ResponseWriter, r *http.Request) {
		t.forcedFail.Store(false)
		fmt.Fprintln(w, "/healthz healthy again")
	})
	return m
}

func run(c config) error {
	t := &target{cfg: c, started: time.Now()}
	if err := t.setupTLS(); err != nil {
		return err
	}
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT)
	log.Printf("started: %+v", c)

	if c.startDelay > 0 {
		log.Printf("slow start: opening listeners in %v", c.startDelay)
		select {
		case <-time.After(c.startDelay):
		case s := <-sigs:
			log.Printf("%v during slow start: exiting", s)
			return nil
		}
	}

	errs := make(chan error, 4)
	var httpSrv, httpsSrv *http.Server
	if c.httpAddr != "" {
		ln, err := net.Listen("tcp", c.httpAddr)
		if err != nil {
			return err
		}
		httpSrv = t.httpServer()
		go func() { errs <- httpSrv.Serve(ln) }()
		log.Printf("HTTP on %s", ln.Addr())
	}
	if c.httpsAddr != "" {
		ln, err := net.Listen("tcp", c.httpsAddr)
		if err != nil {
			return err
		}
		cfg, err := t.serverTLS("HTTPS", []string{"h2", "http/1.1"})
		if err != nil {
			return err
		}
		httpsSrv = &http.Server{Handler: t.mux(), ReadHeaderTimeout: 10 * time.Second}
		go func() { errs <- httpsSrv.Serve(tls.NewListener(ln, cfg)) }()
		log.Printf("HTTPS on %s (certificate from %q, client certificates required: %v)", ln.Addr(), c.tlsDir, c.requireClient)
	}
	if c.tcpAddr != "" {
		ln, err := net.Listen("tcp", c.tcpAddr)
		if err != nil {
			return err
		}
		go func() {
			for {
				conn, err := ln.Accept()
				if err != nil {
					errs <- err
					return
				}
				conn.Close()
			}
		}()
		log.Printf("TCP on %s", ln.Addr())
	}
	var grpcSrv *grpc.Server
	if c.grpcAddr != "" {
		ln, err := net.Listen("tcp", c.grpcAddr)
		if err != nil {
			return err
		}
		if grpcSrv, err = t.grpcServer(); err != nil {
			return err
		}
		go func() { errs <- grpcSrv.Serve(ln) }()
		log.Printf("gRPC health on %s (TLS: %v)", ln.Addr(), c.grpcTLS)
	}

	select {
	case err := <-errs:
		return err
	case s := <-sigs:
		t.terminating.Store(true)
		log.Printf("%v: unready, exiting in %v", s, c.termDelay)
		time.Sleep(c.termDelay)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	for _, srv := range []*http.Server{httpSrv, httpsSrv} {
		if srv == nil {
			continue
		}
		if err := srv.Shutdown(ctx); err != nil && !errors.Is(err, context.DeadlineExceeded) {
			log.Printf("HTTP shutdown: %v", err)
		}
	}
	if grpcSrv != nil {
		grpcSrv.Stop()
	}
	log.Print("exiting")
	return nil
}

// httpServer serves mux over HTTP/1.1, and h2c too with --h2c.
func (t *target) httpServer() *http.Server {
	srv := &http.Server{Handler: t.mux(), ReadHeaderTimeout: 10 * time.Second}
	if t.cfg.h2c {
		srv.Protocols = new(http.Protocols)
		srv.Protocols.SetHTTP1(true)
		srv.Protocols.SetUnencryptedHTTP2(true)
	}
	return srv
}

// grpcServer is the health server, over TLS with --grpc-tls.
func (t *target) grpcServer() (*grpc.Server, error) {
	var opts []grpc.ServerOption
	if t.cfg.grpcTLS {
		// gRPC clients insist on ALPN's h2.
		cfg, err := t.serverTLS("gRPC", []string{"h2"})
		if err != nil {
			return nil, err
		}
		opts = append(opts, grpc.Creds(credentials.NewTLS(cfg)))
	}
	srv := grpc.NewServer(opts...)
	hs := health.NewServer()
	healthpb.RegisterHealthServer(srv, hs)
	go t.syncGRPCHealth(hs)
	return srv, nil
}

// syncGRPCHealth mirrors /healthz into service "" and /readyz into service "ready".
func (t *target) syncGRPCHealth(hs *health.Server) {
	status := func(ok bool) healthpb.HealthCheckResponse_ServingStatus {
		if ok {
			return healthpb.HealthCheckResponse_SERVING
		}
		return healthpb.HealthCheckResponse_NOT_SERVING
	}
	for {
		live, _ := t.healthy()
		ready, _ := t.ready()
		hs.SetServingStatus("", status(live))
		hs.SetServingStatus("ready", status(ready))
		time.Sleep(100 * time.Millisecond)
	}
}

// selfSigned makes a throwaway ECDSA certificate for localhost: the probes
// that use it (gRPC mode TLS) do not verify the server, as upstream's.
func selfSigned() (tls.Certificate, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return tls.Certificate{}, err
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1),
		Subject:      pkix.Name{CommonName: "localhost"},
		DNSNames:     []string{"localhost"},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(24 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return tls.Certificate{}, err
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}, nil
}
