package prober

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"io"
	"log"
	"math/big"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/connectivity"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/probed-dev/probed/pkg/podfiles"
	"github.com/probed-dev/probed/pkg/probespec"
)

// Tests of probed.io/tls (tls.go) against real TLS servers on loopback,
// with certificates made here and the pod's files in a pods directory laid
// out as the kubelet's atomic writer lays out a volume.

const (
	tlsTestUID  = types.UID("6f1c2d3e-4b5a-4c7d-8e9f-0a1b2c3d4e5f")
	tlsTestName = "probe.test"
)

// testCA is a CA made for one test.
type testCA struct {
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
	pem  []byte
}

// testLeaf is a certificate a testCA issued, with its key.
type testLeaf struct {
	cert            *x509.Certificate
	certPEM, keyPEM []byte
	pair            tls.Certificate
}

func newKey(t testing.TB) *ecdsa.PrivateKey {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return key
}

func serial(t testing.TB) *big.Int {
	t.Helper()
	n, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 62))
	if err != nil {
		t.Fatal(err)
	}
	return n
}

func newTestCA(t testing.TB, name string) *testCA {
	t.Helper()
	key := newKey(t)
	tmpl := &x509.Certificate{
		SerialNumber:          serial(t),
		Subject:               pkix.Name{CommonName: name},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(24 * time.Hour),
		IsCA:                  true,
		BasicConstraintsValid: true,
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	return &testCA{cert: cert, key: key, pem: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})}
}

func (ca *testCA) pool() *x509.CertPool {
	p := x509.NewCertPool()
	p.AddCert(ca.cert)
	return p
}

// issue makes a certificate for usage, valid for the DNS names dns (and no
// IP) until notAfter; a notAfter in the past makes an expired one.
func (ca *testCA) issue(t testing.TB, usage x509.ExtKeyUsage, notAfter time.Time, dns ...string) *testLeaf {
	t.Helper()
	key := newKey(t)
	cn := "client"
	if len(dns) > 0 {
		cn = dns[0]
	}
	tmpl := &x509.Certificate{
		SerialNumber: serial(t),
		Subject:      pkix.Name{CommonName: cn},
		DNSNames:     dns,
		NotBefore:    notAfter.Add(-48 * time.Hour),
		NotAfter:     notAfter,
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{usage},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	return &testLeaf{
		cert:    cert,
		certPEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		keyPEM:  pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER}),
		pair:    tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key, Leaf: cert},
	}
}

func (ca *testCA) server(t testing.TB, notAfter time.Time, dns ...string) *testLeaf {
	t.Helper()
	return ca.issue(t, x509.ExtKeyUsageServerAuth, notAfter, dns...)
}

func (ca *testCA) client(t testing.TB, notAfter time.Time) *testLeaf {
	t.Helper()
	return ca.issue(t, x509.ExtKeyUsageClientAuth, notAfter)
}

// writeVolume lays files out in volDir as the kubelet's atomic writer
// does: in a ..2026_<gen> directory that ..data points to (swapped by a
// rename), each key a symlink through ..data; the previous generation is
// removed.
func writeVolume(t testing.TB, volDir, gen string, files map[string][]byte) {
	t.Helper()
	if err := os.MkdirAll(volDir, 0o755); err != nil {
		t.Fatal(err)
	}
	old, _ := os.Readlink(filepath.Join(volDir, "..data"))
	ts := "..2026_" + gen
	if err := os.Mkdir(filepath.Join(volDir, ts), 0o755); err != nil {
		t.Fatal(err)
	}
	for name, data := range files {
		if err := os.WriteFile(filepath.Join(volDir, ts, name), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	tmp := filepath.Join(volDir, "..data_tmp")
	if err := os.Symlink(ts, tmp); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, filepath.Join(volDir, "..data")); err != nil {
		t.Fatal(err)
	}
	for name := range files {
		if _, err := os.Lstat(filepath.Join(volDir, name)); err == nil {
			continue
		}
		if err := os.Symlink(filepath.Join("..data", name), filepath.Join(volDir, name)); err != nil {
			t.Fatal(err)
		}
	}
	if old != "" {
		if err := os.RemoveAll(filepath.Join(volDir, old)); err != nil {
			t.Fatal(err)
		}
	}
}

// podTLSFiles is a fake pod's CA (configMap volume "ca") and client
// certificate (secret volume "client") in a kubelet pods directory.
type podTLSFiles struct {
	root string
	gen  int
}

var (
	podCAFile     = &probespec.VolumeFile{Volume: "ca", Kind: probespec.VolumeConfigMap, Path: probespec.DefaultCAPath}
	podClientCert = &probespec.VolumeFile{Volume: "client", Kind: probespec.VolumeSecret, Path: probespec.DefaultCertPath}
	podClientKey  = &probespec.VolumeFile{Volume: "client", Kind: probespec.VolumeSecret, Path: probespec.DefaultKeyPath}
)

func newPodTLSFiles(t testing.TB) *podTLSFiles {
	t.Helper()
	return &podTLSFiles{root: t.TempDir()}
}

func (f *podTLSFiles) dir() *podfiles.Dir { return podfiles.New(f.root) }

// write swaps in the pod's CA and client certificate (nil: left as is).
func (f *podTLSFiles) write(t testing.TB, ca *testCA, client *testLeaf) {
	t.Helper()
	f.gen++
	vols := filepath.Join(f.root, string(tlsTestUID), "volumes")
	gen := fmt.Sprintf("12_04_18_10_%02d", f.gen)
	if ca != nil {
		writeVolume(t, filepath.Join(vols, "kubernetes.io~configmap", "ca"), gen, map[string][]byte{"ca.crt": ca.pem})
	}
	if client != nil {
		writeVolume(t, filepath.Join(vols, "kubernetes.io~secret", "client"), gen,
			map[string][]byte{"tls.crt": client.certPEM, "tls.key": client.keyPEM})
	}
}

// serverTLS is what a tlsServer answers with: its certificate and, when
// clientCAs is set, a client certificate it requires and verifies; its
// highest TLS version is maxVersion (0: TLS 1.3).
type serverTLS struct {
	cert       *testLeaf
	clientCAs  *x509.CertPool
	maxVersion uint16
}

// tlsServer is an HTTPS or gRPC-over-TLS health server on loopback whose
// certificate can be switched, and whose connections can be dropped.
type tlsServer struct {
	port int
	mat  atomic.Pointer[serverTLS]
	l    *trackListener
}

func (s *tlsServer) use(m serverTLS) { s.mat.Store(&m) }

func (s *tlsServer) tlsConfig(nextProtos ...string) *tls.Config {
	return &tls.Config{GetConfigForClient: func(*tls.ClientHelloInfo) (*tls.Config, error) {
		m := s.mat.Load()
		c := &tls.Config{Certificates: []tls.Certificate{m.cert.pair}, NextProtos: nextProtos, MaxVersion: m.maxVersion}
		if m.clientCAs != nil {
			c.ClientAuth, c.ClientCAs = tls.RequireAndVerifyClientCert, m.clientCAs
		}
		return c, nil
	}}
}

// trackListener counts the connections it accepts and can drop them all.
type trackListener struct {
	net.Listener
	mu       sync.Mutex
	accepted int
	conns    []net.Conn
}

func (l *trackListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err == nil {
		l.mu.Lock()
		l.accepted++
		l.conns = append(l.conns, c)
		l.mu.Unlock()
	}
	return c, err
}

func (l *trackListener) count() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.accepted
}

// drop closes every connection accepted so far.
func (l *trackListener) drop() {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, c := range l.conns {
		_ = c.Close()
	}
	l.conns = nil
}

// startTLSServer serves proto ("https": 200 "ok" on any path, over HTTP/2
// or HTTP/1.1; "grpc": the health service, SERVING) with m.
func startTLSServer(t testing.TB, proto string, m serverTLS) *tlsServer {
	t.Helper()
	nl, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := &tlsServer{l: &trackListener{Listener: nl}}
	s.use(m)
	_, s.port = hostPort(t, nl.Addr().String())
	switch proto {
	case "https":
		srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			_, _ = w.Write([]byte("ok"))
		}))
		_ = srv.Listener.Close()
		srv.Listener = s.l
		srv.EnableHTTP2 = true
		srv.TLS = s.tlsConfig("h2", "http/1.1")
		srv.Config.ErrorLog = log.New(io.Discard, "", 0) // the handshakes the tests fail
		srv.StartTLS()
		t.Cleanup(srv.Close)
	case "grpc":
		gs := grpc.NewServer(grpc.Creds(credentials.NewTLS(s.tlsConfig("h2"))))
		hs := health.NewServer()
		healthpb.RegisterHealthServer(gs, hs)
		done := make(chan struct{})
		go func() { defer close(done); _ = gs.Serve(s.l) }()
		t.Cleanup(func() { hs.Shutdown(); gs.Stop(); <-done })
	default:
		t.Fatalf("no %s server", proto)
	}
	return s
}

// tlsProbeSpec is an HTTPS or gRPC probe of port. A gRPC probe names
// mode TLS only for the kubelet's TLS: probed.io/tls implies it.
func tlsProbeSpec(proto string, port int, kubeletTLS bool) *v1.Probe {
	spec := &v1.Probe{TimeoutSeconds: 5}
	switch proto {
	case "https":
		spec.HTTPGet = &v1.HTTPGetAction{Path: "/healthz", Port: intstr.FromInt32(int32(port)), Scheme: v1.URISchemeHTTPS}
	case "grpc":
		spec.GRPC = &v1.GRPCAction{Port: int32(port)}
		if kubeletTLS {
			mode := v1.GRPCProbeModeTLS
			spec.GRPC.Mode = &mode
		}
	}
	return spec
}

var healthyOutput = map[string]string{"https": "ok", "grpc": "service healthy"}

// base64Run is what a PEM or base64 dump of certificate bytes would show.
var base64Run = regexp.MustCompile(`[A-Za-z0-9+/=]{40,}`)

// noCertBytes fails the test when text holds certificate or key bytes.
func noCertBytes(t testing.TB, what, text string) {
	t.Helper()
	if strings.Contains(text, "BEGIN ") || strings.Contains(text, "PRIVATE KEY") || base64Run.MatchString(text) {
		t.Errorf("%s holds certificate bytes: %q", what, text)
	}
}

// tlsProbe runs one probe of s with tlsSpec (nil: the kubelet's TLS) and
// checks that neither its output nor its error hold certificate bytes.
func tlsProbe(t testing.TB, p *Prober, proto string, srv *tlsServer, tlsSpec *probespec.TLS, sess *Session, keepAlive bool) (Result, string, error) {
	t.Helper()
	target := Target{PodIP: "127.0.0.1", PodUID: tlsTestUID, TLS: tlsSpec, Session: sess, KeepAlive: keepAlive}
	res, out, err := p.runOnce(context.Background(), tlsProbeSpec(proto, srv.port, tlsSpec == nil), target)
	noCertBytes(t, "output", out)
	if err != nil {
		noCertBytes(t, "error", err.Error())
	}
	return res, out, err
}

func wantHealthy(t testing.TB, proto string, res Result, out string, err error) {
	t.Helper()
	if res != Success || out != healthyOutput[proto] || err != nil {
		t.Fatalf("probe = %v %q %v; want Success %q", res, out, err, healthyOutput[proto])
	}
}

// wantTLSFailure checks a Failure whose output carries Go's TLS text want
// (or, for an HTTPS probe, one of also): a gRPC probe's is the connect
// error at once, not the timeout.
func wantTLSFailure(t testing.TB, proto string, port int, res Result, out string, err error, want string, also ...string) {
	t.Helper()
	if res != Failure || err != nil {
		t.Fatalf("probe = %v %q %v; want Failure", res, out, err)
	}
	prefix := map[string]string{
		"https": fmt.Sprintf(`Get "https://127.0.0.1:%d/healthz": `, port),
		"grpc":  fmt.Sprintf(`error: failed to connect service at "127.0.0.1:%d": `, port),
	}[proto]
	if proto != "https" {
		also = nil
	}
	if !strings.HasPrefix(out, prefix) {
		t.Errorf("output %q; want %q...%q", out, prefix, want)
		return
	}
	for _, w := range append([]string{want}, also...) {
		if strings.Contains(out, w) {
			return
		}
	}
	t.Errorf("output %q; want %q...%q", out, prefix, want)
}

// refusedHTTPS is what an HTTPS probe may say, rather than the server's
// alert, when a TLS 1.3 server refuses its certificate: the server's
// verdict comes after the client's handshake has ended, and net/http may
// meet the closed connection, or HTTP/2 give up on it, before it reads
// the alert. (A gRPC probe reads the alert: alertConn.)
var refusedHTTPS = []string{"write: broken pipe", "write: connection reset by peer", "http2: client conn could not be established"}

// TestTLSVerify: every way probed.io/tls verifies a server, or presents a
// client certificate, for HTTPS and gRPC probes.
func TestTLSVerify(t *testing.T) {
	ca := newTestCA(t, "pod CA")
	other := newTestCA(t, "another CA")
	hour := time.Now().Add(time.Hour)
	good := ca.server(t, hour, tlsTestName)
	expired := ca.server(t, time.Now().Add(-time.Hour), tlsTestName)
	foreign := other.server(t, hour, tlsTestName)
	client := ca.client(t, hour)

	files := newPodTLSFiles(t)
	files.write(t, ca, client)
	withCA := func(serverName string) *probespec.TLS {
		return &probespec.TLS{ServerName: serverName, CA: podCAFile}
	}
	withClient := func(spec *probespec.TLS) *probespec.TLS {
		spec.ClientCert, spec.ClientKey = podClientCert, podClientKey
		return spec
	}
	podOpts := TLSOptions{PodFiles: files.dir()}

	type tc struct {
		name   string
		opts   TLSOptions
		server serverTLS
		spec   *probespec.TLS
		// want is the failure's text; "" wants Success.
		want string
		// alsoHTTPS are what an HTTPS probe may say instead.
		alsoHTTPS []string
	}
	cases := []tc{
		{name: "server name and CA", opts: podOpts, server: serverTLS{cert: good}, spec: withCA(tlsTestName)},
		{name: "wrong server name", opts: podOpts, server: serverTLS{cert: good}, spec: withCA("wrong.test"),
			want: "x509: certificate is valid for probe.test, not wrong.test"},
		{name: "the IP without server name", opts: podOpts, server: serverTLS{cert: good}, spec: withCA(""),
			want: "x509: cannot validate certificate for 127.0.0.1 because it doesn't contain any IP SANs"},
		{name: "expired", opts: podOpts, server: serverTLS{cert: expired}, spec: withCA(tlsTestName),
			want: "x509: certificate has expired"},
		{name: "another CA", opts: podOpts, server: serverTLS{cert: foreign}, spec: withCA(tlsTestName),
			want: "x509: certificate signed by unknown authority"},
		{name: "client certificate presented", opts: podOpts, server: serverTLS{cert: good, clientCAs: ca.pool()},
			spec: withClient(withCA(tlsTestName))},
		{name: "client certificate required, none", opts: podOpts, server: serverTLS{cert: good, clientCAs: ca.pool()},
			spec: withCA(tlsTestName), want: "remote error: tls: certificate required", alsoHTTPS: refusedHTTPS},
		{name: "client certificate of a CA the server does not trust", opts: podOpts,
			server: serverTLS{cert: good, clientCAs: other.pool()},
			spec:   withClient(withCA(tlsTestName)), want: "remote error: tls: unknown certificate authority", alsoHTTPS: refusedHTTPS},
		// TLS 1.2 refuses a client certificate within the handshake.
		{name: "TLS 1.2, client certificate presented", opts: podOpts,
			server: serverTLS{cert: good, clientCAs: ca.pool(), maxVersion: tls.VersionTLS12},
			spec:   withClient(withCA(tlsTestName))},
		{name: "TLS 1.2, client certificate required, none", opts: podOpts,
			server: serverTLS{cert: good, clientCAs: ca.pool(), maxVersion: tls.VersionTLS12},
			spec:   withCA(tlsTestName), want: "remote error: tls: handshake failure"},
		{name: "TLS 1.2, client certificate of a CA the server does not trust", opts: podOpts,
			server: serverTLS{cert: good, clientCAs: other.pool(), maxVersion: tls.VersionTLS12},
			spec:   withClient(withCA(tlsTestName)), want: "remote error: tls: unknown certificate authority"},
		{name: "insecureSkipVerify with a client certificate", opts: podOpts, server: serverTLS{cert: foreign, clientCAs: ca.pool()},
			spec: withClient(&probespec.TLS{InsecureSkipVerify: true})},
		{name: "roots Cluster", opts: TLSOptions{PodFiles: files.dir(), ClusterCAData: ca.pem}, server: serverTLS{cert: good},
			spec: &probespec.TLS{ServerName: tlsTestName, Roots: probespec.RootsCluster}},
		{name: "roots Cluster, another CA", opts: TLSOptions{ClusterCAData: other.pem}, server: serverTLS{cert: good},
			spec: &probespec.TLS{ServerName: tlsTestName, Roots: probespec.RootsCluster},
			want: "x509: certificate signed by unknown authority"},
		{name: "roots System", opts: TLSOptions{SystemRoots: ca.pool()}, server: serverTLS{cert: good},
			spec: &probespec.TLS{ServerName: tlsTestName, Roots: probespec.RootsSystem}},
		{name: "roots System, another CA", opts: TLSOptions{SystemRoots: other.pool()}, server: serverTLS{cert: good},
			spec: &probespec.TLS{ServerName: tlsTestName, Roots: probespec.RootsSystem},
			want: "x509: certificate signed by unknown authority"},
	}
	for _, proto := range []string{"https", "grpc"} {
		t.Run(proto, func(t *testing.T) {
			for _, c := range cases {
				t.Run(c.name, func(t *testing.T) {
					srv := startTLSServer(t, proto, c.server)
					p := New(nil, Options{TLS: c.opts})
					sess := NewSession()
					defer sess.Close()
					res, out, err := tlsProbe(t, p, proto, srv, c.spec, sess, false)
					if c.want != "" {
						wantTLSFailure(t, proto, srv.port, res, out, err, c.want, c.alsoHTTPS...)
						return
					}
					wantHealthy(t, proto, res, out, err)
					peer := sess.TLSPeer()
					if peer == nil {
						t.Fatal("TLSPeer() = nil after a handshake")
					}
					if want := c.server.cert.cert; !peer.NotAfter.Equal(want.NotAfter) || peer.Subject != want.Subject.String() {
						t.Errorf("TLSPeer() = %+v; want the server certificate %s, until %v", peer, want.Subject, want.NotAfter)
					}
					if peer.Verified == c.spec.InsecureSkipVerify || peer.ServerName != c.spec.ServerName {
						t.Errorf("TLSPeer() = %+v; want Verified %v, ServerName %q", peer, !c.spec.InsecureSkipVerify, c.spec.ServerName)
					}
					if c.spec.ClientCert != nil && !peer.ClientNotAfter.Equal(client.cert.NotAfter) {
						t.Errorf("TLSPeer().ClientNotAfter = %v; want %v", peer.ClientNotAfter, client.cert.NotAfter)
					}
				})
			}
		})
	}
}

// TestTLSGRPCRefusedClientCertificate: a gRPC probe whose certificate a
// TLS 1.3 server refuses fails at once, every time, with the server's
// alert: the server sends it after the probe's handshake has ended, and
// closes, so the probe's first writes may fail before it is read.
func TestTLSGRPCRefusedClientCertificate(t *testing.T) {
	ca := newTestCA(t, "pod CA")
	files := newPodTLSFiles(t)
	files.write(t, ca, nil)
	srv := startTLSServer(t, "grpc", serverTLS{cert: ca.server(t, time.Now().Add(time.Hour), tlsTestName), clientCAs: ca.pool()})
	p := New(nil, Options{TLS: TLSOptions{PodFiles: files.dir()}})
	spec := &probespec.TLS{ServerName: tlsTestName, CA: podCAFile}
	for range 100 {
		sess := NewSession()
		// One connection attempt within the timeout: no retry hides a
		// lost alert.
		target := Target{PodIP: "127.0.0.1", PodUID: tlsTestUID, TLS: spec, Session: sess, Timeout: time.Second}
		res, out, err := p.runOnce(context.Background(), tlsProbeSpec("grpc", srv.port, false), target)
		sess.Close()
		wantTLSFailure(t, "grpc", srv.port, res, out, err, "remote error: tls: certificate required")
		if t.Failed() {
			break
		}
	}
}

// TestTLSErrors: what keeps a probe from building its TLS is an error
// (Unknown), worded without the node's paths or the files' bytes.
func TestTLSErrors(t *testing.T) {
	ca := newTestCA(t, "pod CA")
	files := newPodTLSFiles(t)
	files.write(t, nil, ca.client(t, time.Now().Add(time.Hour)))
	notPEM := newPodTLSFiles(t)
	writeVolume(t, filepath.Join(notPEM.root, string(tlsTestUID), "volumes", "kubernetes.io~configmap", "ca"), "01",
		map[string][]byte{"ca.crt": []byte("not a certificate")})
	mismatched := newPodTLSFiles(t)
	c1, c2 := ca.client(t, time.Now().Add(time.Hour)), ca.client(t, time.Now().Add(time.Hour))
	mismatched.write(t, nil, &testLeaf{certPEM: c1.certPEM, keyPEM: c2.keyPEM})
	srv := startTLSServer(t, "https", serverTLS{cert: ca.server(t, time.Now().Add(time.Hour), tlsTestName)})
	for _, c := range []struct {
		name string
		opts TLSOptions
		spec *probespec.TLS
		want string
	}{
		{"no pods dir", TLSOptions{}, &probespec.TLS{CA: podCAFile}, podfiles.ErrDisabled.Error()},
		{"no CA file", TLSOptions{PodFiles: files.dir()}, &probespec.TLS{CA: podCAFile},
			`probed.io/tls: configMap volume "ca" has no file ca.crt`},
		{"CA not PEM", TLSOptions{PodFiles: notPEM.dir()}, &probespec.TLS{CA: podCAFile},
			`probed.io/tls: ca: configMap volume "ca": ca.crt holds no PEM certificate`},
		{"key of another certificate", TLSOptions{PodFiles: mismatched.dir()},
			&probespec.TLS{InsecureSkipVerify: true, ClientCert: podClientCert, ClientKey: podClientKey},
			`probed.io/tls: clientCertificate: secret volume "client": tls.crt and tls.key: tls: private key does not match public key`},
		{"roots Cluster without a cluster CA", TLSOptions{}, &probespec.TLS{Roots: probespec.RootsCluster},
			"probed.io/tls: roots Cluster: probed knows no cluster CA"},
	} {
		t.Run(c.name, func(t *testing.T) {
			sess := NewSession()
			defer sess.Close()
			res, out, err := tlsProbe(t, New(nil, Options{TLS: c.opts}), "https", srv, c.spec, sess, false)
			if res != Unknown || err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("probe = %v %q %v; want Unknown and an error with %q", res, out, err, c.want)
			}
			for _, p := range []string{files.root, notPEM.root, mismatched.root, string(tlsTestUID)} {
				if strings.Contains(err.Error(), p) {
					t.Errorf("error %q names the node's path %s", err, p)
				}
			}
			if n := srv.l.count(); n != 0 {
				t.Errorf("%d connections to the server; want none", n)
			}
		})
	}
}

// TestTLSKubeletParity: a probe without probed.io/tls verifies nothing,
// as the kubelet's, against the servers a verifying probe refuses; and
// its session shows no peer.
func TestTLSKubeletParity(t *testing.T) {
	ca := newTestCA(t, "pod CA")
	other := newTestCA(t, "another CA")
	hour := time.Now().Add(time.Hour)
	for _, proto := range []string{"https", "grpc"} {
		for name, cert := range map[string]*testLeaf{
			"another CA": other.server(t, hour, tlsTestName),
			"expired":    ca.server(t, time.Now().Add(-time.Hour), tlsTestName),
			"other name": ca.server(t, hour, "wrong.test"),
		} {
			t.Run(proto+"/"+name, func(t *testing.T) {
				srv := startTLSServer(t, proto, serverTLS{cert: cert})
				files := newPodTLSFiles(t)
				files.write(t, ca, nil)
				p := New(nil, Options{TLS: TLSOptions{PodFiles: files.dir()}})
				for _, keep := range []bool{false, true} {
					sess := NewSession()
					res, out, err := tlsProbe(t, p, proto, srv, nil, sess, keep)
					wantHealthy(t, proto, res, out, err)
					if peer := sess.TLSPeer(); peer != nil {
						t.Errorf("TLSPeer() = %+v for a probe without %s; want nil", peer, probespec.TLSField)
					}
					sess.Close()
				}
			})
		}
	}
}

// TestTLSRotation: a worker's probes build their TLS once and reuse it
// while no file changes (no file is read again); after the kubelet swaps
// in a new CA and client certificate, and the server moves to new
// material, the next probe uses the new files, on a new connection.
func TestTLSRotation(t *testing.T) {
	for _, proto := range []string{"https", "grpc"} {
		for _, keep := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/keepAlive=%v", proto, keep), func(t *testing.T) {
				testTLSRotation(t, proto, keep)
			})
		}
	}
}

func testTLSRotation(t *testing.T, proto string, keep bool) {
	now := time.Now()
	ca1, ca2 := newTestCA(t, "CA one"), newTestCA(t, "CA two")
	server1, client1 := ca1.server(t, now.Add(time.Hour), tlsTestName), ca1.client(t, now.Add(2*time.Hour))
	server2, client2 := ca2.server(t, now.Add(3*time.Hour), tlsTestName), ca2.client(t, now.Add(4*time.Hour))

	files := newPodTLSFiles(t)
	files.write(t, ca1, client1)
	srv := startTLSServer(t, proto, serverTLS{cert: server1, clientCAs: ca1.pool()})
	p := New(nil, Options{TLS: TLSOptions{PodFiles: files.dir()}})
	spec := &probespec.TLS{ServerName: tlsTestName, CA: podCAFile, ClientCert: podClientCert, ClientKey: podClientKey}
	sess := NewSession()
	defer sess.Close()

	probe := func() {
		t.Helper()
		res, out, err := tlsProbe(t, p, proto, srv, spec, sess, keep)
		wantHealthy(t, proto, res, out, err)
	}
	wantPeer := func(server, client *testLeaf) {
		t.Helper()
		peer := sess.TLSPeer()
		if peer == nil || !peer.Verified || !peer.NotAfter.Equal(server.cert.NotAfter) || !peer.ClientNotAfter.Equal(client.cert.NotAfter) ||
			peer.Issuer != server.cert.Issuer.String() {
			t.Fatalf("TLSPeer() = %+v; want the server certificate of %s until %v, the client's until %v",
				peer, server.cert.Issuer, server.cert.NotAfter, client.cert.NotAfter)
		}
	}
	// sameMaterial checks that the session's material is m, and so each of
	// its files the same *podfiles.File: nothing was read again or rebuilt.
	sameMaterial := func(m *tlsMaterial) {
		t.Helper()
		if got := sess.tlsMaterial(); got != m {
			t.Fatalf("the session's TLS was rebuilt (%p, was %p) though no file changed", got, m)
		}
	}

	probe()
	wantPeer(server1, client1)
	m1 := sess.tlsMaterial()
	if m1 == nil || len(m1.files) != 3 {
		t.Fatalf("session material %+v; want the 3 files read", m1)
	}
	probe()
	probe()
	sameMaterial(m1)
	wantConns := 3
	if keep {
		wantConns = 1
	}
	if n := srv.l.count(); n != wantConns {
		t.Errorf("%d connections for 3 probes; want %d", n, wantConns)
	}

	files.write(t, ca2, client2)
	srv.use(serverTLS{cert: server2, clientCAs: ca2.pool()})
	probe()
	wantPeer(server2, client2)
	m2 := sess.tlsMaterial()
	if m2 == m1 {
		t.Fatal("the session's TLS was not rebuilt after the files changed")
	}
	for f, file := range m2.files {
		if file == m1.files[f] {
			t.Errorf("%s was not read again after the swap", f.Path)
		}
	}
	probe()
	sameMaterial(m2)
	if keep {
		wantConns = 2 // one more, in the new material's
	} else {
		wantConns = 5
	}
	if n := srv.l.count(); n != wantConns {
		t.Errorf("%d connections after the rotation; want %d", n, wantConns)
	}
}

// TestTLSKeptConnectionReverifies: with keep-alive, a server that drops
// the kept connection and comes back with a certificate the pod's CA does
// not sign fails the next probe at once with Go's x509 text; its peer
// stays the last verified one.
func TestTLSKeptConnectionReverifies(t *testing.T) {
	for _, proto := range []string{"https", "grpc"} {
		t.Run(proto, func(t *testing.T) {
			ca, other := newTestCA(t, "pod CA"), newTestCA(t, "another CA")
			good := ca.server(t, time.Now().Add(time.Hour), tlsTestName)
			files := newPodTLSFiles(t)
			files.write(t, ca, nil)
			srv := startTLSServer(t, proto, serverTLS{cert: good})
			p := New(nil, Options{TLS: TLSOptions{PodFiles: files.dir()}})
			spec := &probespec.TLS{ServerName: tlsTestName, CA: podCAFile}
			sess := NewSession()
			defer sess.Close()
			res, out, err := tlsProbe(t, p, proto, srv, spec, sess, true)
			wantHealthy(t, proto, res, out, err)

			srv.use(serverTLS{cert: other.server(t, time.Now().Add(time.Hour), tlsTestName)})
			srv.l.drop()
			if proto == "grpc" {
				// Until the kept ClientConn has seen its connection go.
				grpcWaitFor(t, "the kept connection to go", func() bool {
					sess.mu.Lock()
					defer sess.mu.Unlock()
					return sess.grpc.conn.GetState() != connectivity.Ready
				})
			}
			res, out, err = tlsProbe(t, p, proto, srv, spec, sess, true)
			if proto == "https" && res == Failure && !strings.Contains(out, "x509") {
				// The probe came before net/http saw the kept connection
				// go, and HTTP/2 does not retry it: it fails once on the
				// dead connection, as it would without probed.io/tls.
				for _, dead := range []string{"unexpected EOF", "connection reset by peer", "broken pipe"} {
					if strings.Contains(out, dead) {
						res, out, err = tlsProbe(t, p, proto, srv, spec, sess, true)
						break
					}
				}
			}
			wantTLSFailure(t, proto, srv.port, res, out, err, "x509: certificate signed by unknown authority")
			if peer := sess.TLSPeer(); peer == nil || !peer.NotAfter.Equal(good.cert.NotAfter) {
				t.Errorf("TLSPeer() = %+v; want the last verified server's", peer)
			}
		})
	}
}

// TestTLSClusterCAFile: roots Cluster reads the cluster CA file, kept as a
// service account volume keeps it, again when it changes.
func TestTLSClusterCAFile(t *testing.T) {
	ca1, ca2 := newTestCA(t, "cluster CA one"), newTestCA(t, "cluster CA two")
	saDir := filepath.Join(t.TempDir(), "serviceaccount")
	writeVolume(t, saDir, "01", map[string][]byte{"ca.crt": ca1.pem})
	for _, proto := range []string{"https", "grpc"} {
		t.Run(proto, func(t *testing.T) {
			srv := startTLSServer(t, proto, serverTLS{cert: ca1.server(t, time.Now().Add(time.Hour), tlsTestName)})
			// ClusterCAData is the fallback: the file wins.
			p := New(nil, Options{TLS: TLSOptions{ClusterCAFile: filepath.Join(saDir, "ca.crt"), ClusterCAData: ca2.pem}})
			spec := &probespec.TLS{ServerName: tlsTestName, Roots: probespec.RootsCluster}
			sess := NewSession()
			defer sess.Close()
			res, out, err := tlsProbe(t, p, proto, srv, spec, sess, false)
			wantHealthy(t, proto, res, out, err)
			m := sess.tlsMaterial()
			res, out, err = tlsProbe(t, p, proto, srv, spec, sess, false)
			wantHealthy(t, proto, res, out, err)
			if sess.tlsMaterial() != m {
				t.Error("the session's TLS was rebuilt though the cluster CA file did not change")
			}
		})
	}
	t.Run("rotated", func(t *testing.T) {
		srv := startTLSServer(t, "https", serverTLS{cert: ca2.server(t, time.Now().Add(time.Hour), tlsTestName)})
		p := New(nil, Options{TLS: TLSOptions{ClusterCAFile: filepath.Join(saDir, "ca.crt")}})
		spec := &probespec.TLS{ServerName: tlsTestName, Roots: probespec.RootsCluster}
		sess := NewSession()
		defer sess.Close()
		res, out, err := tlsProbe(t, p, "https", srv, spec, sess, false)
		wantTLSFailure(t, "https", srv.port, res, out, err, "x509: certificate signed by unknown authority")
		writeVolume(t, saDir, "02", map[string][]byte{"ca.crt": ca2.pem})
		res, out, err = tlsProbe(t, p, "https", srv, spec, sess, false)
		wantHealthy(t, "https", res, out, err)
	})
}
