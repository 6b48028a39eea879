package kubeletparity

import (
	"bufio"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"math/big"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// rawServer answers every connection once it has read a request head
// (startRaw, over TLS if asked) or its first bytes (startEager), and counts
// connections and requests.
type rawServer struct {
	port        int
	conns, reqs atomic.Int32
}

func startRaw(t *testing.T, tlsOn bool, script func(c net.Conn)) *rawServer {
	t.Helper()
	return serveRaw(t, func(s *rawServer, c net.Conn) {
		if tlsOn {
			tc := tls.Server(c, &tls.Config{Certificates: []tls.Certificate{selfSigned(t)}})
			if tc.Handshake() != nil {
				return
			}
			c = tc
		}
		r := bufio.NewReader(c)
		for {
			line, err := r.ReadString('\n')
			if err != nil {
				return
			}
			if line == "\r\n" {
				break
			}
		}
		s.reqs.Add(1)
		script(c)
	})
}

// startEager is a plain server that answers the first bytes it reads, whatever
// they are, with raw, as an HTTP server answers a request line it cannot
// parse. startRaw waits for a blank line, which a TLS ClientHello holds only
// by chance (its key share is random bytes): so an HTTPS probe of it timed
// out, unless its hello happened to hold "\n\r\n" (in a cold run here, the
// kubelet's did and probed's did not).
func startEager(t *testing.T, raw string) *rawServer {
	t.Helper()
	return serveRaw(t, func(s *rawServer, c net.Conn) {
		if _, err := c.Read(make([]byte, 1)); err != nil {
			return
		}
		s.reqs.Add(1)
		_, _ = c.Write([]byte(raw))
		halfClose(c)
	})
}

// serveRaw accepts connections on loopback until the test ends, and hands
// each to handle with a 15 s deadline.
func serveRaw(t *testing.T, handle func(s *rawServer, c net.Conn)) *rawServer {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := &rawServer{port: l.Addr().(*net.TCPAddr).Port}
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			s.conns.Add(1)
			wg.Add(1)
			go func() {
				defer wg.Done()
				defer func() { _ = c.Close() }()
				_ = c.SetDeadline(time.Now().Add(15 * time.Second))
				handle(s, c)
			}()
		}
	}()
	t.Cleanup(func() { _ = l.Close(); wg.Wait() })
	return s
}

var (
	certOnce sync.Once
	cert     tls.Certificate
)

// selfSigned is a certificate for a name no probe dials.
func selfSigned(t *testing.T) tls.Certificate {
	certOnce.Do(func() {
		key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		if err != nil {
			t.Fatal(err)
		}
		tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "not-the-pod.example"},
			DNSNames: []string{"not-the-pod.example"}, NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
			KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
		der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
		if err != nil {
			t.Fatal(err)
		}
		cert = tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}
	})
	return cert
}

// halfClose ends the server's side of c, as a server honouring
// Connection: close does.
func halfClose(c net.Conn) {
	switch c := c.(type) {
	case *net.TCPConn:
		_ = c.CloseWrite()
	case *tls.Conn:
		_ = c.CloseWrite()
	}
}

func reply(raw string) func(net.Conn) {
	return func(c net.Conn) {
		_, _ = c.Write([]byte(raw))
		halfClose(c)
	}
}

func slowly(pause time.Duration, parts ...string) func(net.Conn) {
	return func(c net.Conn) {
		for _, p := range parts {
			time.Sleep(pause)
			if _, err := c.Write([]byte(p)); err != nil {
				return
			}
		}
		halfClose(c)
	}
}

func resetAfter(raw string) func(net.Conn) {
	return func(c net.Conn) {
		_, _ = c.Write([]byte(raw))
		if tc, ok := c.(*net.TCPConn); ok {
			_ = tc.SetLinger(0)
		}
		_ = c.Close()
	}
}

func silentAfter(raw string, d time.Duration) func(net.Conn) {
	return func(c net.Conn) {
		_, _ = c.Write([]byte(raw))
		time.Sleep(d)
	}
}

func httpSpec(port int, path string, timeout int32) *v1.Probe {
	return &v1.Probe{TimeoutSeconds: timeout, ProbeHandler: v1.ProbeHandler{HTTPGet: &v1.HTTPGetAction{
		Path: path, Port: intstr.FromInt32(int32(port)), Scheme: v1.URISchemeHTTP}}}
}

// TestHTTPMatchesKubelet serves each hostile answer, over plain HTTP and
// over TLS, to the kubelet's pkg/probe/http and to probed: the same result,
// output, error and events (the response bytes probed withholds aside), and
// the same requests: one per probe, plus a followed redirect's own.
func TestHTTPMatchesKubelet(t *testing.T) {
	t.Parallel()
	big := strings.Repeat("x", 30<<10)
	const chunked = "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
	// A case's script may redirect to its own plain and TLS targets.
	type targets struct{ plain, tls *rawServer }
	on := func(f func(net.Conn)) func(targets) func(net.Conn) { return func(targets) func(net.Conn) { return f } }
	cases := []struct {
		name   string
		script func(targets) func(net.Conn)
	}{
		{"200 with length", on(reply("HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"))},
		{"200 until close", on(reply("HTTP/1.1 200 OK\r\n\r\nbody until close"))},
		{"204 with a body", on(reply("HTTP/1.1 204 No Content\r\nContent-Length: 3\r\n\r\nabc"))},
		{"HTTP/1.0", on(reply("HTTP/1.0 200 OK\r\n\r\nold"))},
		{"500 with a body", on(reply("HTTP/1.1 500 Internal Server Error\r\nContent-Length: 6\r\n\r\nsecret"))},
		{"status 600", on(reply("HTTP/1.1 600 Odd\r\nContent-Length: 0\r\n\r\n"))},
		{"big body", on(reply("HTTP/1.1 200 OK\r\n\r\n" + big))},
		{"chunked", on(reply(chunked + "5\r\nhello\r\n0\r\n\r\n"))},
		{"slow chunked", on(slowly(300*time.Millisecond, chunked, "5\r\nhello\r\n", "0\r\n\r\n"))},
		{"bad chunk", on(reply(chunked + "zz\r\nbad chunk\r\n"))},
		{"chunked, then silence", on(silentAfter(chunked+"5\r\nhello\r\n", 2500*time.Millisecond))},
		{"100 then 200", on(reply("HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"))},
		{"103 then 503", on(reply("HTTP/1.1 103 Early Hints\r\nLink: </a.css>\r\n\r\nHTTP/1.1 503 Busy\r\nContent-Length: 0\r\n\r\n"))},
		{"101", on(reply("HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: h2c\r\n\r\nafter"))},
		{"redirect to the other port", func(tg targets) func(net.Conn) {
			return reply("HTTP/1.1 302 Found\r\nLocation: http://127.0.0.1:" + strconv.Itoa(tg.plain.port) + "/ok\r\nContent-Length: 0\r\n\r\n")
		}},
		{"redirect to another host", on(reply("HTTP/1.1 302 Found\r\nLocation: http://192.0.2.1/x\r\nContent-Length: 5\r\n\r\nmoved"))},
		{"redirect loop", on(reply("HTTP/1.1 307 Temporary Redirect\r\nLocation: /loop\r\nContent-Length: 0\r\n\r\n"))},
		{"redirect to https", func(tg targets) func(net.Conn) {
			return reply("HTTP/1.1 302 Found\r\nLocation: https://127.0.0.1:" + strconv.Itoa(tg.tls.port) + "/\r\n\r\n")
		}},
		{"304", on(reply("HTTP/1.1 304 Not Modified\r\n\r\n"))},
		{"bad Location", on(reply("HTTP/1.1 302 Found\r\nLocation: ::bad url\r\n\r\n"))},
		{"garbage", on(reply("garbage\r\n\r\n"))},
		{"LF only", on(reply("HTTP/1.1 200 OK\n\nlf only"))},
		{"folded header", on(reply("HTTP/1.1 200 OK\r\n Folded: x\r\n\r\n"))},
		{"header with a control byte", on(reply("HTTP/1.1 200 OK\r\nX-Internal-Api-Key: s3cr3t\x01\r\n\r\n"))},
		{"two lengths", on(reply("HTTP/1.1 200 OK\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\nab"))},
		{"unknown transfer coding", on(reply("HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip\r\n\r\n"))},
		{"closes at once", on(func(net.Conn) {})},
		{"reset", on(resetAfter(""))},
		{"reset mid head", on(resetAfter("HTTP/1.1 200 OK\r\nContent-"))},
		{"reset mid body", on(resetAfter("HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nabc"))},
		{"short body", on(reply("HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nshort"))},
		{"slow body", on(silentAfter("HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nabc", 2500*time.Millisecond))},
		{"silence", on(silentAfter("", 2500*time.Millisecond))},
		{"status line, then silence", on(silentAfter("HTTP/1.1 200 OK\r\n", 2500*time.Millisecond))},
	}
	for _, tlsOn := range []bool{false, true} {
		for _, tc := range cases {
			name := tc.name
			if tlsOn {
				name = "TLS/" + name
			}
			t.Run(name, func(t *testing.T) {
				t.Parallel()
				tg := targets{startRaw(t, false, reply("HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")),
					startRaw(t, true, reply("HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"))}
				srv := startRaw(t, tlsOn, tc.script(tg))
				spec := httpSpec(srv.port, "/hz", 2)
				if tlsOn {
					spec.HTTPGet.Scheme = v1.URISchemeHTTPS
				}
				compareOn(t, spec, &v1.Container{Name: "app"}, true, func() int32 {
					return srv.reqs.Load() + tg.plain.reqs.Load() + tg.tls.reqs.Load()
				})
			})
		}
	}
}

// TestHTTPTLSMismatchMatchesKubelet: https to a plain HTTP server, and to
// a server whose handshake is garbage.
func TestHTTPTLSMismatchMatchesKubelet(t *testing.T) {
	t.Parallel()
	plain := startEager(t, "HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")
	// A server that answers a ClientHello with garbage at once.
	garbage := startEager(t, "\x16\x03\x01\x00\x05hello, not TLS")
	for _, port := range []int{plain.port, garbage.port} {
		spec := httpSpec(port, "/", 2)
		spec.HTTPGet.Scheme = v1.URISchemeHTTPS
		compareOn(t, spec, &v1.Container{Name: "app"}, true, func() int32 { return plain.reqs.Load() })
	}
}

// TestHTTPRequestsMatchKubelet: the request heads both send, headers and
// a Host override included, are the same bytes.
func TestHTTPRequestsMatchKubelet(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	var heads []string
	// serveRaw, not startRaw: startRaw reads the head before its script runs.
	port := serveRaw(t, func(_ *rawServer, c net.Conn) {
		r := bufio.NewReader(c)
		var head strings.Builder
		for {
			line, err := r.ReadString('\n')
			if err != nil {
				return
			}
			if line == "\r\n" {
				break
			}
			head.WriteString(line)
		}
		mu.Lock()
		heads = append(heads, head.String())
		mu.Unlock()
		_, _ = c.Write([]byte("HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"))
	}).port
	for _, headers := range [][]v1.HTTPHeader{
		nil,
		{{Name: "Host", Value: "vhost.example"}, {Name: "x-token", Value: "a"}, {Name: "X-Token", Value: "b"}},
		{{Name: "User-Agent", Value: ""}, {Name: "Accept", Value: ""}},
		{{Name: "accept", Value: "application/json"}, {Name: "User-Agent", Value: "mine/1"}},
	} {
		spec := httpSpec(port, "/a b?x=1&y=%20", 2)
		spec.HTTPGet.HTTPHeaders = headers
		mu.Lock()
		heads = nil
		mu.Unlock()
		compareOn(t, spec, &v1.Container{Name: "app"}, true, func() int32 { mu.Lock(); defer mu.Unlock(); return int32(len(heads)) })
		mu.Lock()
		// The kubelet's, then probed's under each host policy.
		if len(heads) != 3 || heads[0] != heads[1] || heads[0] != heads[2] {
			t.Errorf("headers %v: request heads differ:\nkubelet %q\nprobed  %q", headers, heads[0], heads[1:])
		} else if !strings.HasPrefix(heads[0], "GET /a%20b?x=1&y=%20 HTTP/1.1\r\n") {
			t.Errorf("headers %v: the server read %q, not the probe's request", headers, heads[0])
		}
		mu.Unlock()
	}
}

// TestH2CMatchesKubelet: httpGet.protocol HTTP2 (KEP-5999) through the
// kubelet's ProbeH2C and probed: an h2c server, one that speaks only
// HTTP/1.1, and garbage.
func TestH2CMatchesKubelet(t *testing.T) {
	t.Parallel()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var reqs atomic.Int32
	h2c := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		reqs.Add(1)
		if r.ProtoMajor != 2 {
			w.WriteHeader(http.StatusHTTPVersionNotSupported)
			return
		}
		if r.URL.Path == "/fail" {
			w.WriteHeader(http.StatusServiceUnavailable)
		}
		_, _ = w.Write([]byte("h2c ok"))
	}), Protocols: new(http.Protocols)}
	h2c.Protocols.SetUnencryptedHTTP2(true)
	go func() { _ = h2c.Serve(l) }()
	t.Cleanup(func() { _ = h2c.Close() })
	h1 := startRaw(t, false, reply("HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"))
	junk := startRaw(t, false, reply("garbage\r\n\r\n"))
	count := func() int32 { return reqs.Load() + h1.reqs.Load() + junk.reqs.Load() }
	h2 := v1.HTTPProtocolHTTP2
	for _, tc := range []struct {
		port int
		path string
	}{{l.Addr().(*net.TCPAddr).Port, "/ok"}, {l.Addr().(*net.TCPAddr).Port, "/fail"}, {h1.port, "/"}, {junk.port, "/"}} {
		spec := httpSpec(tc.port, tc.path, 2)
		spec.HTTPGet.Protocol = &h2
		compareOn(t, spec, &v1.Container{Name: "app"}, true, count)
	}
}
