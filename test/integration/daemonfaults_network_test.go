//go:build integration

package integration

import (
	"io"
	"net"
	"net/http"
	"net/url"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"

	"github.com/probed-dev/probed/test/harness/controlplane"
)

// tcpRelay forwards every connection accepted on addr to upstream. It is not
// listening until start: until then, connecting to addr is refused, as for an
// API server that was never reachable.
type tcpRelay struct {
	t        *testing.T
	addr     string
	upstream string
	mu       sync.Mutex
	ln       net.Listener
}

func (r *tcpRelay) start() {
	r.t.Helper()
	ln, err := net.Listen("tcp", r.addr)
	if err != nil {
		r.t.Fatalf("relay listen on %s: %v", r.addr, err)
	}
	r.mu.Lock()
	r.ln = ln
	r.mu.Unlock()
	r.t.Cleanup(func() { _ = ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go r.pipe(c)
		}
	}()
}

func (r *tcpRelay) pipe(c net.Conn) {
	defer c.Close()
	u, err := net.Dial("tcp", r.upstream)
	if err != nil {
		return
	}
	defer u.Close()
	done := make(chan struct{}, 2)
	go func() { _, _ = io.Copy(u, c); done <- struct{}{} }()
	go func() { _, _ = io.Copy(c, u); done <- struct{}{} }()
	<-done
}

// TestStartWithAPIServerNeverReachable: probed starts while its API server
// address refuses connections and has never answered. It stays up, /healthz
// is 200 and /readyz 503 naming the unsynced informer, and once the address
// answers it syncs, becomes ready and writes its pods' conditions. The
// shared API server keeps running: only probed's path to it is cut.
func TestStartWithAPIServerNeverReachable(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ip := loopbackIP()
	app := startHTTPTarget(t, ip, true)
	pod := e.createPod("web", mustJSON(probes{"app": {"readinessProbe": httpProbe(app.Port, "/ready", nil)}}), true, container{name: "app"})
	e.runPod(pod, ip, time.Minute)

	// probed's kubeconfig points at a relay address that is not listening yet.
	upstream, err := url.Parse(cp.RESTConfig().Host)
	if err != nil {
		t.Fatal(err)
	}
	relay := &tcpRelay{t: t, addr: freeAddr(t), upstream: upstream.Host}
	token, err := cp.TokenFor(e.ctx, "probed-system", "probed", "probed-"+e.node, "", e.node)
	if err != nil {
		t.Fatal(err)
	}
	cfg := cp.ConfigForToken(token)
	cfg.Host = "https://" + relay.addr
	e.kubeconfig = filepath.Join(t.TempDir(), "relay.kubeconfig")
	if err := controlplane.WriteKubeconfig(e.kubeconfig, cfg); err != nil {
		t.Fatal(err)
	}

	p := e.startProbedNoWait()
	eventually(t, "/healthz 200 with the API server unreachable", 30*time.Second, func() bool {
		c, _ := p.get("/healthz")
		return c == http.StatusOK
	})
	// Long enough for several list attempts and their back-off.
	consistently(t, "alive and not ready while unreachable", 5*time.Second, func() bool {
		if c, _ := p.get("/healthz"); c != http.StatusOK {
			return false
		}
		c, body := p.get("/readyz")
		return c == http.StatusServiceUnavailable && strings.Contains(body, "informer")
	})
	if c, body := p.get("/readyz"); c != http.StatusServiceUnavailable {
		t.Fatalf("/readyz = %d %q, want 503", c, body)
	}
	if app.hits.Load() != 0 {
		t.Errorf("probed probed %d times without having seen a pod", app.hits.Load())
	}
	select {
	case <-p.Done():
		t.Fatalf("probed exited while the API server was unreachable: %v", p.ExitErr())
	default:
	}

	relay.start()
	up := time.Now()
	// client-go's reflector backs off up to ~30 s between list attempts.
	eventually(t, "/readyz 200 once reachable", 60*time.Second, func() bool { c, _ := p.get("/readyz"); return c == http.StatusOK })
	readyAfter := time.Since(up)
	e.waitCond("web", "probed.io/ready", v1.ConditionTrue, 30*time.Second)
	t.Logf("API server reachable -> /readyz 200 in %v, -> pod condition True in %v",
		readyAfter.Round(10*time.Millisecond), time.Since(up).Round(10*time.Millisecond))
}
