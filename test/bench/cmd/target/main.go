// Command target serves the loopback endpoints the benchmark probes: HTTP 200
// on /healthz, a TCP port that accepts, and a gRPC health service that
// answers SERVING. It runs in its own process (pinned to its own core by the
// orchestrator) so that the prober's CPU is measured alone.
//
// It prints {"http":P,"tcp":P,"grpc":P} on stdout once listening and serves
// until stdin closes or it gets SIGTERM.
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
)

func main() {
	host := flag.String("host", "127.0.0.1", "address to listen on")
	flag.Parse()

	listen := func() net.Listener {
		l, err := net.Listen("tcp", net.JoinHostPort(*host, "0"))
		if err != nil {
			fmt.Fprintln(os.Stderr, "target:", err)
			os.Exit(1)
		}
		return l
	}
	hl, tl, gl := listen(), listen(), listen()

	// HTTP: a tiny 200. The probe asks for Connection: close, so the server
	// closes after the response, as an application would.
	mux := http.NewServeMux()
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) {
		_, _ = io.WriteString(w, "ok")
	})
	hs := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = hs.Serve(hl) }()

	// TCP: accept, and hold the connection until the peer closes it, as any
	// real server does; the prober's close then comes first.
	go func() {
		for {
			c, err := tl.Accept()
			if err != nil {
				return
			}
			go func() {
				// No read deadline: every prober closes at once, and a timer
				// per connection would make the target the bottleneck sooner.
				_, _ = io.Copy(io.Discard, c)
				_ = c.Close()
			}()
		}
	}()

	// gRPC: the standard health service, SERVING for "".
	gs := grpc.NewServer()
	healthpb.RegisterHealthServer(gs, health.NewServer())
	go func() { _ = gs.Serve(gl) }()

	port := func(l net.Listener) int { return l.Addr().(*net.TCPAddr).Port }
	_ = json.NewEncoder(os.Stdout).Encode(map[string]int{"http": port(hl), "tcp": port(tl), "grpc": port(gl)})

	done := make(chan struct{})
	go func() { _, _ = io.Copy(io.Discard, os.Stdin); close(done) }()
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGTERM, syscall.SIGINT)
	select {
	case <-done:
	case <-sig:
	}
	gs.Stop()
	_ = hs.Close()
	_ = tl.Close()
}
