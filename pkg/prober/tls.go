package prober

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"sync"
	"time"

	"google.golang.org/grpc/credentials"
	"k8s.io/apimachinery/pkg/types"

	"github.com/probed-dev/probed/pkg/podfiles"
	"github.com/probed-dev/probed/pkg/probespec"
)

// Verified TLS (probed.io/tls, docs/tls.md). A probe with it verifies the
// server against a CA of the pod's volumes, the system roots or the
// cluster's CA, and presents the pod's client certificate to a server that
// asks. Its tls.Config is the worker's (its Session's), built from the
// files and rebuilt only when one of them changes: a rotated certificate
// or CA is used from the next probe on, and an unchanged one costs a stat
// per file per probe. Probes without it keep the kubelet's unverified TLS.

// TLSOptions are where verified TLS finds its trust and credentials.
type TLSOptions struct {
	// PodFiles reads the pod volume files probed.io/tls names; nil reads
	// none (such probes error with podfiles.ErrDisabled).
	PodFiles *podfiles.Dir
	// ClusterCAFile, else ClusterCAData, is the cluster's CA (roots:
	// Cluster): the one probed trusts for the API server, which every
	// namespace's kube-root-ca.crt publishes. The file is re-read when it
	// changes.
	ClusterCAFile string
	ClusterCAData []byte
	// SystemRoots replaces the system's roots (roots: System) when set.
	SystemRoots *x509.CertPool
}

// tlsSource builds the tls.Config of verifying probes.
type tlsSource struct {
	opts TLSOptions
}

// tlsMaterial is one worker's built TLS: what it was built from, and the
// Config (shared by that worker's transports until the files change).
type tlsMaterial struct {
	spec    *probespec.TLS
	files   map[probespec.VolumeFile]*podfiles.File
	cluster *podfiles.File
	cfg     *tls.Config
	// client is the presented certificate's leaf; nil without one.
	client *x509.Certificate
}

// TLSPeer is what a worker's last TLS handshake showed of the server, and
// of the certificate it presented; /debug/probes and kubectl probed status
// show it, and it feeds the certificate expiry metric.
type TLSPeer struct {
	// ServerName is the name verified (and sent in SNI); empty: the address.
	ServerName string `json:"serverName,omitempty"`
	// Verified: the server's chain verified; false with insecureSkipVerify.
	Verified bool `json:"verified"`
	// Subject and DNSNames are the server certificate's.
	Subject  string   `json:"subject,omitempty"`
	DNSNames []string `json:"dnsNames,omitempty"`
	// Issuer is the server certificate's issuer.
	Issuer string `json:"issuer,omitempty"`
	// NotAfter is when the server certificate expires.
	NotAfter time.Time `json:"notAfter"`
	// ClientNotAfter is when the presented client certificate expires;
	// zero without one.
	ClientNotAfter time.Time `json:"clientNotAfter,omitzero"`
	// At is when the handshake was made.
	At time.Time `json:"at"`
}

// maxPeerDNSNames bounds the names TLSPeer keeps of a certificate (the
// server's bytes are the pod's).
const maxPeerDNSNames = 8

// maxPeerTextBytes bounds a subject or issuer TLSPeer keeps.
const maxPeerTextBytes = 256

// config returns the tls.Config for target's probed.io/tls, from its
// Session's material when no file changed. ok is false when target asks
// for no verified TLS.
func (src *tlsSource) config(target Target) (cfg *tls.Config, ok bool, err error) {
	if target.TLS == nil {
		return nil, false, nil
	}
	s := target.Session
	old := s.tlsMaterial()
	if old != nil && old.spec != target.TLS {
		old = nil
	}
	m, err := src.build(target.PodUID, target.TLS, old)
	if err != nil {
		return nil, true, fmt.Errorf("%s: %w", probespec.TLSField, err)
	}
	if m != old {
		m.cfg.VerifyConnection = s.notePeer(m)
		s.setTLSMaterial(m)
	}
	return m.cfg, true, nil
}

// build reads spec's files and returns old when none changed, else new
// material.
func (src *tlsSource) build(uid types.UID, spec *probespec.TLS, old *tlsMaterial) (*tlsMaterial, error) {
	// Read first, allocate only on a change: most probes find none.
	var read [3]*podfiles.File
	files := [3]*probespec.VolumeFile{spec.CA, spec.ClientCert, spec.ClientKey}
	changed := old == nil
	for i, f := range files {
		if f == nil {
			continue
		}
		var prev *podfiles.File
		if old != nil {
			prev = old.files[*f]
		}
		got, err := src.opts.PodFiles.Read(uid, f, prev)
		if err != nil {
			return nil, err
		}
		changed = changed || got != prev
		read[i] = got
	}
	var cluster *podfiles.File
	if spec.Roots == probespec.RootsCluster && src.opts.ClusterCAFile != "" {
		var prev *podfiles.File
		if old != nil {
			prev = old.cluster
		}
		got, err := podfiles.ReadPath(src.opts.ClusterCAFile, prev)
		if err != nil {
			return nil, fmt.Errorf("the cluster's CA: %w", err)
		}
		changed = changed || got != prev
		cluster = got
	}
	if !changed {
		return old, nil
	}
	m := &tlsMaterial{spec: spec, files: map[probespec.VolumeFile]*podfiles.File{}, cluster: cluster}
	for i, f := range files {
		if f != nil {
			m.files[*f] = read[i]
		}
	}
	cfg := &tls.Config{MinVersion: tls.VersionTLS12, ServerName: spec.ServerName}
	switch {
	case spec.InsecureSkipVerify:
		cfg.InsecureSkipVerify = true //nolint:gosec // the user's explicit choice: present a certificate, verify nothing
	case spec.CA != nil:
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(m.files[*spec.CA].Data) {
			return nil, fmt.Errorf("ca: %s volume %q: %s holds no PEM certificate", spec.CA.Kind, spec.CA.Volume, spec.CA.Path)
		}
		cfg.RootCAs = pool
	case spec.Roots == probespec.RootsCluster:
		data := src.opts.ClusterCAData
		if m.cluster != nil {
			data = m.cluster.Data
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(data) {
			return nil, errors.New("roots Cluster: probed knows no cluster CA (it trusts the API server without one)")
		}
		cfg.RootCAs = pool
	default:
		pool := src.opts.SystemRoots
		if pool == nil {
			var err error
			if pool, err = x509.SystemCertPool(); err != nil {
				return nil, fmt.Errorf("roots System: %v", err)
			}
		}
		cfg.RootCAs = pool
	}
	if spec.ClientCert != nil {
		pair, err := tls.X509KeyPair(m.files[*spec.ClientCert].Data, m.files[*spec.ClientKey].Data)
		if err != nil {
			return nil, fmt.Errorf("clientCertificate: %s volume %q: %s and %s: %v", spec.ClientCert.Kind, spec.ClientCert.Volume,
				spec.ClientCert.Path, spec.ClientKey.Path, err)
		}
		m.client = pair.Leaf
		// Presented whatever CAs the server names: it is the pod's own.
		cfg.GetClientCertificate = func(*tls.CertificateRequestInfo) (*tls.Certificate, error) { return &pair, nil }
	}
	m.cfg = cfg
	return m, nil
}

// notePeer returns the VerifyConnection hook that records a handshake's
// peer in s (after Go has verified the chain, when it does).
func (s *Session) notePeer(m *tlsMaterial) func(tls.ConnectionState) error {
	return func(cs tls.ConnectionState) error {
		if s == nil || len(cs.PeerCertificates) == 0 {
			return nil
		}
		leaf := cs.PeerCertificates[0]
		p := &TLSPeer{
			ServerName: m.spec.ServerName,
			Verified:   len(cs.VerifiedChains) > 0,
			Subject:    clip(leaf.Subject.String()),
			Issuer:     clip(leaf.Issuer.String()),
			NotAfter:   leaf.NotAfter,
			At:         time.Now(),
		}
		for i, n := range leaf.DNSNames {
			if i == maxPeerDNSNames {
				break
			}
			p.DNSNames = append(p.DNSNames, clip(n))
		}
		if m.client != nil {
			p.ClientNotAfter = m.client.NotAfter
		}
		s.mu.Lock()
		s.peer = p
		s.mu.Unlock()
		return nil
	}
}

func clip(s string) string {
	if len(s) > maxPeerTextBytes {
		return s[:maxPeerTextBytes] + "..."
	}
	return s
}

// TLSPeer returns what the session's last TLS handshake showed; nil
// before one, or for a probe without probed.io/tls.
func (s *Session) TLSPeer() *TLSPeer {
	if s == nil {
		return nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.peer
}

func (s *Session) tlsMaterial() *tlsMaterial {
	if s == nil {
		return nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.tls
}

func (s *Session) setTLSMaterial(m *tlsMaterial) {
	if s == nil {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.tls = m
}

// handshakeCreds are a gRPC probe's TLS credentials that keep the last
// handshake error, which grpc-go only retries on: a certificate that does
// not verify fails the probe at once, in Go's words, instead of at the
// timeout.
type handshakeCreds struct {
	credentials.TransportCredentials
	last *handshakeErr
}

type handshakeErr struct {
	mu  sync.Mutex
	err error
}

func newHandshakeCreds(cfg *tls.Config) *handshakeCreds {
	return &handshakeCreds{TransportCredentials: credentials.NewTLS(cfg), last: &handshakeErr{}}
}

func (c *handshakeCreds) ClientHandshake(ctx context.Context, authority string, conn net.Conn) (net.Conn, credentials.AuthInfo, error) {
	out, info, err := c.TransportCredentials.ClientHandshake(ctx, authority, conn)
	c.last.set(err)
	if err != nil {
		return nil, nil, err
	}
	return &alertConn{Conn: out, last: c.last}, info, nil
}

func (h *handshakeErr) set(err error) {
	h.mu.Lock()
	h.err = err
	h.mu.Unlock()
}

// alertConn notes a TLS alert read after the handshake: under TLS 1.3 a
// server refuses the client's certificate only then.
type alertConn struct {
	net.Conn
	last *handshakeErr
}

func (c *alertConn) Read(b []byte) (int, error) {
	n, err := c.Conn.Read(b)
	if isRemoteAlert(err) {
		c.last.set(err)
	}
	return n, err
}

// alertWait bounds how long a failed write waits for the alert that
// explains it.
const alertWait = 100 * time.Millisecond

// Write notes the alert of a server that refused our certificate and
// closed the connection before we read its alert: under TLS 1.3 our first
// write may meet the closed connection, and grpc-go then closes it unread.
func (c *alertConn) Write(b []byte) (int, error) {
	n, err := c.Conn.Write(b)
	if err != nil {
		_ = c.Conn.SetReadDeadline(time.Now().Add(alertWait))
		if _, rerr := c.Conn.Read(make([]byte, 1)); isRemoteAlert(rerr) {
			c.last.set(rerr)
		}
	}
	return n, err
}

// isRemoteAlert reports whether err is a TLS alert the peer sent. Over
// TCP crypto/tls returns it as a *net.OpError "remote error" around an
// unexported type: tls.AlertError is only QUIC's.
func isRemoteAlert(err error) bool {
	var op *net.OpError
	return errors.As(err, &op) && op.Op == "remote error"
}

func (c *handshakeCreds) Clone() credentials.TransportCredentials {
	return &handshakeCreds{TransportCredentials: c.TransportCredentials.Clone(), last: c.last}
}

// certificateError returns the last handshake's error when the server's
// certificate did not verify, or the server refused ours; else nil.
func (c *handshakeCreds) certificateError() error {
	if c == nil {
		return nil
	}
	c.last.mu.Lock()
	err := c.last.err
	c.last.mu.Unlock()
	if isCertificateError(err) {
		return err
	}
	return nil
}

// isCertificateError reports whether err is a verification failure on
// either side, which no retry within a probe cures.
func isCertificateError(err error) bool {
	if err == nil {
		return false
	}
	var (
		verr *tls.CertificateVerificationError
		unk  x509.UnknownAuthorityError
		host x509.HostnameError
		inv  x509.CertificateInvalidError
	)
	return errors.As(err, &verr) || isRemoteAlert(err) || errors.As(err, &unk) || errors.As(err, &host) || errors.As(err, &inv)
}
