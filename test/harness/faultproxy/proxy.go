package faultproxy

import (
	"bufio"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"sync"
	"sync/atomic"
	"time"
)

// CutMode is how CutWatches ends a watch stream.
type CutMode int

const (
	// CutReset aborts the stream mid-flight, as a dropped connection would.
	CutReset CutMode = iota
	// CutExpired ends the stream with a 410 Expired ERROR event, as an
	// apiserver does when the watch's resourceVersion is too old; informers
	// relist on it.
	CutExpired
)

// Options configure Start.
type Options struct {
	// Upstream is the apiserver's URL, https://127.0.0.1:<port>.
	Upstream string
	// UpstreamCAPEM is the CA that signed the apiserver's serving certificate.
	UpstreamCAPEM []byte
}

// Stats counts what the proxy saw. Injected requests count in their class too.
type Stats struct {
	Reads, Watches, StatusWrites, OtherWrites int64
	// PodLists counts lists of pods: an informer's initial list and relists.
	PodLists int64
	// Injected counts requests answered with a Fault.
	Injected int64
	// WatchesCut counts streams ended by CutWatches.
	WatchesCut int64
}

// Proxy is a running fault-injecting proxy. Its methods are safe for
// concurrent use.
type Proxy struct {
	// URL is https://127.0.0.1:<port>.
	URL string
	// CAPEM is the certificate clients must trust.
	CAPEM []byte

	upstream  *url.URL
	transport *http.Transport
	rp        *httputil.ReverseProxy
	srv       *http.Server

	mu      sync.Mutex
	faults  []*activeFault
	watches map[uint64]chan CutMode
	nextID  uint64

	reads, watchN, statusWrites, otherWrites, podLists, injected, cut atomic.Int64
}

// quiet drops the proxy's own error logs: aborted streams are the point.
var quiet = log.New(io.Discard, "", 0)

// Start listens on 127.0.0.1 and serves until Close.
func Start(opts Options) (*Proxy, error) {
	up, err := url.Parse(opts.Upstream)
	if err != nil {
		return nil, err
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(opts.UpstreamCAPEM) {
		return nil, errors.New("faultproxy: no certificate in UpstreamCAPEM")
	}
	cert, caPEM, err := selfSigned()
	if err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	p := &Proxy{
		URL:      "https://" + ln.Addr().String(),
		CAPEM:    caPEM,
		upstream: up,
		transport: &http.Transport{
			TLSClientConfig:   &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12},
			ForceAttemptHTTP2: true,
			IdleConnTimeout:   90 * time.Second,
		},
		watches: map[uint64]chan CutMode{},
	}
	p.rp = &httputil.ReverseProxy{
		Rewrite:       func(r *httputil.ProxyRequest) { r.SetURL(up) },
		Transport:     p.transport,
		FlushInterval: -1,
		ErrorLog:      quiet,
	}
	p.srv = &http.Server{
		Handler:   p,
		TLSConfig: &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12},
		ErrorLog:  quiet,
	}
	go func() { _ = p.srv.ServeTLS(ln, "", "") }()
	return p, nil
}

// Close stops serving and drops every connection.
func (p *Proxy) Close() error {
	err := p.srv.Close()
	p.transport.CloseIdleConnections()
	return err
}

// SetFaults replaces the active faults; with none it clears them.
func (p *Proxy) SetFaults(faults ...Fault) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.faults = nil
	for _, f := range faults {
		p.faults = append(p.faults, &activeFault{Fault: f})
	}
}

// CutWatches ends every open watch stream the proxy forwards and returns how
// many it ended. Clients see the cut at once.
func (p *Proxy) CutWatches(mode CutMode) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	n := 0
	for _, c := range p.watches {
		select {
		case c <- mode:
			n++
		default: // already being cut
		}
	}
	return n
}

// CutWatchesEvery cuts every open watch each interval, cycling through
// modes (CutReset if none), until the returned stop is called.
func (p *Proxy) CutWatchesEvery(interval time.Duration, modes ...CutMode) (stop func()) {
	if len(modes) == 0 {
		modes = []CutMode{CutReset}
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		tick := time.NewTicker(interval)
		defer tick.Stop()
		for i := 0; ; i++ {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
				p.CutWatches(modes[i%len(modes)])
			}
		}
	}()
	return func() { cancel(); <-done }
}

// Stats returns the counters so far.
func (p *Proxy) Stats() Stats {
	return Stats{
		Reads: p.reads.Load(), Watches: p.watchN.Load(), StatusWrites: p.statusWrites.Load(),
		OtherWrites: p.otherWrites.Load(), PodLists: p.podLists.Load(),
		Injected: p.injected.Load(), WatchesCut: p.cut.Load(),
	}
}

// ServeHTTP implements http.Handler.
func (p *Proxy) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	c := classify(r)
	map[Class]*atomic.Int64{Read: &p.reads, Watch: &p.watchN, StatusWrite: &p.statusWrites, OtherWrite: &p.otherWrites}[c].Add(1)
	if isPodList(r) {
		p.podLists.Add(1)
	}
	if f, ok := p.fault(c); ok {
		p.injected.Add(1)
		writeStatus(w, f)
		return
	}
	if c == Watch {
		p.serveWatch(w, r)
		return
	}
	p.rp.ServeHTTP(w, r)
}

func (p *Proxy) fault(c Class) (Fault, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, f := range p.faults {
		if f.hit(c) {
			return f.Fault, true
		}
	}
	return Fault{}, false
}

func (p *Proxy) register() (uint64, chan CutMode) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.nextID++
	c := make(chan CutMode, 1)
	p.watches[p.nextID] = c
	return p.nextID, c
}

func (p *Proxy) unregister(id uint64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	delete(p.watches, id)
}

// serveWatch forwards a watch event by event, flushing each, until either
// side ends it or CutWatches does.
func (p *Proxy) serveWatch(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := context.WithCancel(r.Context())
	defer cancel()
	id, cut := p.register()
	defer p.unregister(id)

	out := r.Clone(ctx)
	out.RequestURI = ""
	out.URL.Scheme, out.URL.Host = p.upstream.Scheme, p.upstream.Host
	out.Host = p.upstream.Host
	// JSON, so that a cut can add an event of its own.
	out.Header.Set("Accept", "application/json")
	resp, err := p.transport.RoundTrip(out)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadGateway)
		return
	}
	defer resp.Body.Close()
	for k, vs := range resp.Header {
		if k != "Content-Length" {
			w.Header()[k] = vs
		}
	}
	w.WriteHeader(resp.StatusCode)
	flusher, _ := w.(http.Flusher)
	if resp.StatusCode != http.StatusOK || flusher == nil {
		_, _ = io.Copy(w, resp.Body)
		return
	}
	flusher.Flush()

	events := make(chan []byte)
	go func() {
		defer close(events)
		br := bufio.NewReaderSize(resp.Body, 64<<10)
		for {
			b, err := br.ReadBytes('\n')
			if len(b) > 0 {
				select {
				case events <- b:
				case <-ctx.Done():
					return
				}
			}
			if err != nil {
				return
			}
		}
	}()
	for {
		select {
		case b, ok := <-events:
			if !ok {
				return
			}
			if _, err := w.Write(b); err != nil {
				return
			}
			flusher.Flush()
		case mode := <-cut:
			p.cut.Add(1)
			if mode == CutExpired {
				_, _ = w.Write(expiredEvent)
				flusher.Flush()
				return
			}
			panic(http.ErrAbortHandler) // the server resets the stream
		case <-ctx.Done():
			return
		}
	}
}
