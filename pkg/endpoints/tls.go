package endpoints

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"sync"

	certutil "k8s.io/client-go/util/cert"
)

// ServingCert says where the TLS serving certificate comes from.
type ServingCert struct {
	// CertFile and KeyFile are a PEM certificate (chain) and key, reloaded
	// whenever either file changes. Both empty: a self-signed certificate
	// made in memory at start.
	CertFile, KeyFile string
	// SelfSigned is a certificate made in memory (SelfSigned); nil: one
	// is made at start for Hosts.
	SelfSigned *SelfSignedCert
	// Hosts name the self-signed certificate: DNS names or IP addresses,
	// the first its subject.
	Hosts []string
}

func (c ServingCert) validate() error {
	if (c.CertFile == "") != (c.KeyFile == "") {
		return errors.New("a serving certificate needs both a certificate file and a key file")
	}
	if c.CertFile != "" && c.SelfSigned != nil {
		return errors.New("a serving certificate from files or a self-signed one, not both")
	}
	if c.CertFile == "" && c.SelfSigned == nil && len(c.Hosts) == 0 {
		return errors.New("a self-signed serving certificate needs at least one host name")
	}
	return nil
}

// servingTLS builds the server's TLS config: the certificate of c, from
// files re-read when they change (certFiles), or made in memory. Its
// goroutine stops with ctx; wg counts it.
func servingTLS(ctx context.Context, c ServingCert, wg *sync.WaitGroup) (*tls.Config, error) {
	if err := c.validate(); err != nil {
		return nil, err
	}
	// HTTP/1.1 only: a scrape needs no multiplexing, and HTTP/2 gives
	// clients that have not authenticated yet more to abuse.
	cfg := &tls.Config{MinVersion: tls.VersionTLS12, NextProtos: []string{"http/1.1"}}
	if c.CertFile != "" {
		files, err := newCertFiles(c.CertFile, c.KeyFile)
		if err != nil {
			return nil, err
		}
		wg.Add(1)
		go func() { defer wg.Done(); files.run(ctx, certReloadInterval) }()
		cfg.GetCertificate = files.get
		return cfg, nil
	}
	ss := c.SelfSigned
	if ss == nil {
		made, err := NewSelfSigned(c.Hosts)
		if err != nil {
			return nil, err
		}
		ss = &made
	}
	pair, err := tls.X509KeyPair(ss.CertPEM, ss.KeyPEM)
	if err != nil {
		return nil, fmt.Errorf("self-signed serving certificate: %w", err)
	}
	cfg.Certificates = []tls.Certificate{pair}
	return cfg, nil
}

// SelfSignedCert is a serving certificate and the CA that signed it, made
// in memory.
type SelfSignedCert struct {
	// CertPEM is the serving certificate, then its CA.
	CertPEM []byte
	KeyPEM  []byte
	// CAPEM is the CA alone: what a client verifies CertPEM against. Its
	// key is gone once the certificate is signed, so nothing else can be
	// signed by it.
	CAPEM []byte
}

// NewSelfSigned makes a CA and a serving certificate it signs for hosts (DNS
// names or IP addresses, the first the subject), with client-go's generator
// as the kubelet and kube-apiserver use for theirs. Nothing is written to
// disk; a restart makes a new one.
func NewSelfSigned(hosts []string) (SelfSignedCert, error) {
	if len(hosts) == 0 {
		return SelfSignedCert{}, errors.New("a self-signed serving certificate needs at least one host name")
	}
	var ips []net.IP
	var names []string
	for _, h := range hosts[1:] {
		if ip := net.ParseIP(h); ip != nil {
			ips = append(ips, ip)
		} else {
			names = append(names, h)
		}
	}
	cert, key, err := certutil.GenerateSelfSignedCertKeyWithOptions(certutil.SelfSignedCertKeyOptions{
		Host: hosts[0], AlternateIPs: ips, AlternateDNS: names,
	})
	if err != nil {
		return SelfSignedCert{}, fmt.Errorf("generating a self-signed serving certificate: %w", err)
	}
	chain, err := certutil.ParseCertsPEM(cert)
	if err != nil || len(chain) != 2 || !chain[1].IsCA {
		return SelfSignedCert{}, fmt.Errorf("generated serving certificate: want the certificate and its CA (%v)", err)
	}
	ca, err := certutil.EncodeCertificates(chain[1])
	if err != nil {
		return SelfSignedCert{}, err
	}
	return SelfSignedCert{CertPEM: cert, KeyPEM: key, CAPEM: ca}, nil
}
