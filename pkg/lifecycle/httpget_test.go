package lifecycle

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/probed-dev/probed/pkg/hostpolicy"
	"github.com/probed-dev/probed/pkg/prober"
)

// hookServer is a loopback HTTP server that records the requests it gets.
type hookServer struct {
	*httptest.Server
	mu   sync.Mutex
	reqs []*http.Request
}

func newHookServer(t *testing.T, h http.HandlerFunc) *hookServer {
	s := &hookServer{}
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.mu.Lock()
		s.reqs = append(s.reqs, r.Clone(context.Background()))
		s.mu.Unlock()
		h(w, r)
	}))
	t.Cleanup(s.Close)
	return s
}

func (s *hookServer) requests() []*http.Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]*http.Request(nil), s.reqs...)
}

func (s *hookServer) port(t *testing.T) int {
	_, p, err := net.SplitHostPort(s.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	n, _ := strconv.Atoi(p)
	return n
}

func httpHook(a v1.HTTPGetAction) *v1.LifecycleHandler { return &v1.LifecycleHandler{HTTPGet: &a} }

func TestHTTPGetHook(t *testing.T) {
	t.Run("the kubelet's request to the pod IP, named port, any status is success", func(t *testing.T) {
		srv := newHookServer(t, func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusInternalServerError) })
		app := &v1.Container{Name: "app", Ports: []v1.ContainerPort{{Name: "admin", ContainerPort: int32(srv.port(t))}}}
		hook := httpHook(v1.HTTPGetAction{Path: "/drain?now=1", Port: intstr.FromString("admin"),
			HTTPHeaders: []v1.HTTPHeader{{Name: "X-Drain", Value: "yes"}}})
		r := New(nil, Options{UserAgent: prober.NewUserAgent("1.33")})
		if err := r.Run(context.Background(), testPod("127.0.0.1"), app, "containerd://abc", hook); err != nil {
			t.Fatalf("Run = %v (a 500 is a success for a hook, as in the kubelet)", err)
		}
		reqs := srv.requests()
		if len(reqs) != 1 {
			t.Fatalf("%d requests, want 1", len(reqs))
		}
		q := reqs[0]
		checks := map[string][2]string{
			"method":          {q.Method, "GET"},
			"URI":             {q.RequestURI, "/drain?now=1"},
			"User-Agent":      {q.Header.Get("User-Agent"), "kube-lifecycle/1.33"},
			"Accept":          {q.Header.Get("Accept"), "*/*"},
			"X-Drain":         {q.Header.Get("X-Drain"), "yes"},
			"Accept-Encoding": {q.Header.Get("Accept-Encoding"), "gzip"}, // the kubelet's plain transport asks for it
			"Connection":      {q.Header.Get("Connection"), ""},          // keep-alive client, as the kubelet's
			"Host":            {q.Host, "127.0.0.1:" + strconv.Itoa(srv.port(t))},
		}
		for what, c := range checks {
			if c[0] != c[1] {
				t.Errorf("%s = %q, want %q", what, c[0], c[1])
			}
		}
	})
	t.Run("a same-host redirect is followed", func(t *testing.T) {
		srv := newHookServer(t, func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Path == "/old" {
				http.Redirect(w, r, "/new", http.StatusFound)
			}
		})
		hook := httpHook(v1.HTTPGetAction{Path: "/old", Port: intstr.FromInt32(int32(srv.port(t)))})
		if err := New(nil, Options{}).Run(context.Background(), testPod("127.0.0.1"), &v1.Container{Name: "app"}, "containerd://abc", hook); err != nil {
			t.Fatalf("Run = %v", err)
		}
		if reqs := srv.requests(); len(reqs) != 2 || reqs[1].URL.Path != "/new" {
			t.Errorf("requests %d, want /old then /new", len(reqs))
		}
	})
	t.Run("a transport error fails with the kubelet's message", func(t *testing.T) {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		port := ln.Addr().(*net.TCPAddr).Port
		_ = ln.Close() // nothing listens there now
		hook := httpHook(v1.HTTPGetAction{Path: "/drain", Port: intstr.FromInt32(int32(port))})
		err = New(nil, Options{}).Run(context.Background(), testPod("127.0.0.1"), &v1.Container{Name: "app"}, "containerd://abc", hook)
		prefix := `HTTP lifecycle hook (/drain) for Container "app" in Pod "web_ns(uid-1)" failed - error: Get "http://127.0.0.1:` + strconv.Itoa(port) + `/drain": `
		if err == nil || !strings.HasPrefix(err.Error(), prefix) || !strings.Contains(err.Error(), "connection refused") {
			t.Errorf("Run = %v, want %q...connection refused", err, prefix)
		}
	})
	t.Run("no host and no pod IP", func(t *testing.T) {
		hook := httpHook(v1.HTTPGetAction{Path: "/drain", Port: intstr.FromInt32(80)})
		err := New(nil, Options{}).Run(context.Background(), testPod(""), &v1.Container{Name: "app"}, "containerd://abc", hook)
		if err == nil || !strings.Contains(err.Error(), "failed to find networking container") {
			t.Errorf("Run = %v, want the kubelet's \"failed to find networking container\"", err)
		}
	})
	t.Run("the host policy refuses a node-local host; nothing is sent", func(t *testing.T) {
		srv := newHookServer(t, func(http.ResponseWriter, *http.Request) {})
		g := hostpolicy.NewGuard(hostpolicy.DenyNodeLocal, hostpolicy.GuardOptions{})
		hook := httpHook(v1.HTTPGetAction{Host: "127.0.0.1", Path: "/drain", Port: intstr.FromInt32(int32(srv.port(t)))})
		err := New(nil, Options{HostGuard: g}).Run(context.Background(), testPod("192.0.2.10"), &v1.Container{Name: "app"}, "containerd://abc", hook)
		if err == nil || !hostpolicy.IsRefused(err) || !strings.Contains(err.Error(), "127.0.0.1 is loopback, refused by --probe-host-policy=deny-node-local") {
			t.Errorf("Run = %v, want a host policy refusal", err)
		}
		if n := len(srv.requests()); n != 0 {
			t.Errorf("%d requests reached the refused host", n)
		}
	})
	t.Run("the host policy allows the pod's own IP", func(t *testing.T) {
		srv := newHookServer(t, func(http.ResponseWriter, *http.Request) {})
		g := hostpolicy.NewGuard(hostpolicy.PodIPs, hostpolicy.GuardOptions{})
		hook := httpHook(v1.HTTPGetAction{Path: "/drain", Port: intstr.FromInt32(int32(srv.port(t)))})
		if err := New(nil, Options{HostGuard: g}).Run(context.Background(), testPod("127.0.0.1"), &v1.Container{Name: "app"}, "containerd://abc", hook); err != nil {
			t.Errorf("Run = %v", err)
		}
		if n := len(srv.requests()); n != 1 {
			t.Errorf("%d requests, want 1", n)
		}
	})
	t.Run("https answered in plain HTTP is retried over http without Authorization", func(t *testing.T) {
		srv := newHookServer(t, func(http.ResponseWriter, *http.Request) {})
		rec := &fakeRecorder{}
		hook := httpHook(v1.HTTPGetAction{Scheme: v1.URISchemeHTTPS, Path: "/drain", Port: intstr.FromInt32(int32(srv.port(t))),
			HTTPHeaders: []v1.HTTPHeader{{Name: "Authorization", Value: "Bearer secret"}}})
		if err := New(nil, Options{Recorder: rec}).Run(context.Background(), testPod("127.0.0.1"), &v1.Container{Name: "app"}, "containerd://abc", hook); err != nil {
			t.Fatalf("Run = %v", err)
		}
		reqs := srv.requests()
		if len(reqs) != 1 || reqs[0].Header.Get("Authorization") != "" {
			t.Errorf("plain HTTP requests %d (want the retry alone), Authorization %q (want none)", len(reqs), reqs[0].Header.Get("Authorization"))
		}
		want := "|Warning|LifecycleHTTPFallback|request to HTTPS lifecycle hook 127.0.0.1:" + strconv.Itoa(srv.port(t)) + " got HTTP response, retry with HTTP succeeded"
		if ev := rec.list(); len(ev) != 1 || ev[0] != want {
			t.Errorf("events %q, want [%q] (on the pod)", ev, want)
		}
	})
	t.Run("ends when ctx ends", func(t *testing.T) {
		release := make(chan struct{})
		srv := newHookServer(t, func(http.ResponseWriter, *http.Request) { <-release })
		defer close(release)
		hook := httpHook(v1.HTTPGetAction{Path: "/slow", Port: intstr.FromInt32(int32(srv.port(t)))})
		ctx, cancel := context.WithCancel(context.Background())
		done := runAsync(func() error {
			return New(nil, Options{}).Run(ctx, testPod("127.0.0.1"), &v1.Container{Name: "app"}, "containerd://abc", hook)
		})
		for deadline := time.Now().Add(guard); len(srv.requests()) == 0; time.Sleep(time.Millisecond) {
			select {
			case err := <-done:
				t.Fatalf("Run returned before the request arrived: %v", err)
			default:
			}
			if time.Now().After(deadline) {
				t.Fatal("timed out waiting for the request")
			}
		}
		cancel()
		if err := recvErr(t, done, "the http hook"); !errors.Is(err, context.Canceled) {
			t.Errorf("Run = %v, want the context's error", err)
		}
	})
}

// Issue 30, item 2: a preStop httpGet hook reads what a probe reads of a
// response's head, MaxResponseHeaderBytes, not the kubelet's 10 MB: a
// server that answers with 1 MiB of headers fails the hook, saying so,
// where the kubelet would read them all and call the hook a success.
func TestHTTPGetHookBoundsTheResponseHead(t *testing.T) {
	var pad strings.Builder
	for i := 0; pad.Len() < 1<<20; i++ {
		fmt.Fprintf(&pad, "X-Pad-%d: %s\r\n", i, strings.Repeat("p", 1000))
	}
	raw := []byte("HTTP/1.1 200 OK\r\n" + pad.String() + "Content-Length: 0\r\n\r\n")
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = l.Close() })
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				_, _ = c.Read(make([]byte, 4096))
				_, _ = c.Write(raw)
			}()
		}
	}()
	port := l.Addr().(*net.TCPAddr).Port
	hook := httpHook(v1.HTTPGetAction{Path: "/drain", Port: intstr.FromInt32(int32(port))})
	err = New(nil, Options{}).Run(context.Background(), testPod("127.0.0.1"), &v1.Container{Name: "app"}, "containerd://abc", hook)
	if err == nil || !strings.Contains(err.Error(), "server response headers exceeded 32768 bytes") {
		t.Fatalf("Run = %v; want the head refused past %d bytes", err, prober.MaxResponseHeaderBytes)
	}
}
