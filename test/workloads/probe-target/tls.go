package main

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"log"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
)

// The files of --tls-dir, named as in a kubernetes.io/tls Secret (and a
// cert-manager Certificate's).
const (
	certFile = "tls.crt"
	keyFile  = "tls.key"
	caFile   = "ca.crt"
)

// maxLoggedCN bounds the subject CN a handshake's log line quotes.
const maxLoggedCN = 64

// setupTLS checks the TLS flags and, with --tls-dir, loads its files: a
// missing or bad file stops probe-target at start.
func (t *target) setupTLS() error {
	c := t.cfg
	switch {
	case c.requireClient && c.tlsDir == "":
		return errors.New("--tls-require-client-cert needs --tls-dir (its ca.crt verifies clients)")
	case c.tlsDir != "" && c.httpsAddr == "" && !(c.grpcTLS && c.grpcAddr != ""):
		return errors.New("--tls-dir needs --https, or --grpc with --grpc-tls")
	case c.tlsDir == "":
		return nil
	}
	t.certs = &certDir{dir: c.tlsDir, requireClient: c.requireClient, logf: log.Printf}
	_, _, err := t.certs.current()
	return err
}

// serverTLS is the TLS configuration of the listener named listener (for the
// log), offering protos in ALPN: --tls-dir's certificate, re-read as it
// changes, or else a self-signed one made now.
func (t *target) serverTLS(listener string, protos []string) (*tls.Config, error) {
	if t.certs != nil {
		return t.certs.serverConfig(listener, protos), nil
	}
	cert, err := selfSigned()
	if err != nil {
		return nil, err
	}
	return &tls.Config{Certificates: []tls.Certificate{cert}, NextProtos: protos, MinVersion: tls.VersionTLS12}, nil
}

// certDir serves TLS from a directory's files and re-reads them when they
// change. A Secret volume's files are symbolic links through ..data, which
// the kubelet points at a new directory when the Secret changes: stat(2)
// follows them, so the files' identity (device, inode, size, modification
// time) changes with it. Three stats per handshake are cheap beside the
// handshake; a directory watch would need a goroutine and still a stat.
type certDir struct {
	dir           string
	requireClient bool
	logf          func(format string, args ...any)

	mu sync.Mutex
	// stamp identifies the files cert and clientCAs were loaded from.
	stamp     string
	cert      *tls.Certificate
	clientCAs *x509.CertPool
	// badStamp is the last stamp that failed to load, and why: logged once.
	badStamp string
}

func (d *certDir) files() []string {
	names := []string{certFile, keyFile}
	if d.requireClient {
		names = append(names, caFile)
	}
	for i, n := range names {
		names[i] = filepath.Join(d.dir, n)
	}
	return names
}

// stampOf identifies the current contents of files without reading them.
func stampOf(files []string) (string, error) {
	var b strings.Builder
	for _, f := range files {
		var st syscall.Stat_t
		if err := syscall.Stat(f, &st); err != nil {
			return "", &os.PathError{Op: "stat", Path: f, Err: err}
		}
		fmt.Fprintf(&b, "%d:%d:%d:%d.%d;", st.Dev, st.Ino, st.Size, st.Mtim.Sec, st.Mtim.Nsec)
	}
	return b.String(), nil
}

// current returns the certificate and client CAs, re-read first if the
// files changed since they were last loaded. A change that does not load
// (a half-written file) keeps the last good ones and is logged once; before
// any load it is an error.
func (d *certDir) current() (*tls.Certificate, *x509.CertPool, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	stamp, err := stampOf(d.files())
	if err == nil && stamp == d.stamp {
		return d.cert, d.clientCAs, nil
	}
	var cert tls.Certificate
	var pool *x509.CertPool
	if err == nil {
		cert, pool, err = d.load()
	}
	if err != nil {
		if d.cert == nil {
			return nil, nil, err
		}
		if bad := stamp + err.Error(); bad != d.badStamp {
			d.badStamp = bad
			d.logf("TLS: keeping the certificate loaded before: %v", err)
		}
		return d.cert, d.clientCAs, nil
	}
	if d.cert != nil {
		d.logf("TLS: %s changed: serving %s from now on", d.dir, describe(&cert))
	} else {
		d.logf("TLS: serving %s from %s", describe(&cert), d.dir)
	}
	d.stamp, d.cert, d.clientCAs = stamp, &cert, pool
	return d.cert, d.clientCAs, nil
}

func (d *certDir) load() (tls.Certificate, *x509.CertPool, error) {
	cert, err := tls.LoadX509KeyPair(filepath.Join(d.dir, certFile), filepath.Join(d.dir, keyFile))
	if err != nil {
		return tls.Certificate{}, nil, err
	}
	if !d.requireClient {
		return cert, nil, nil
	}
	ca, err := os.ReadFile(filepath.Join(d.dir, caFile))
	if err != nil {
		return tls.Certificate{}, nil, err
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(ca) {
		return tls.Certificate{}, nil, fmt.Errorf("%s: no PEM certificate", filepath.Join(d.dir, caFile))
	}
	return cert, pool, nil
}

// describe names a loaded certificate for the log.
func describe(c *tls.Certificate) string {
	if c.Leaf == nil {
		return "a certificate"
	}
	return fmt.Sprintf("certificate %q (DNS names %q, issuer %q)", boundCN(c.Leaf.Subject.CommonName),
		c.Leaf.DNSNames, boundCN(c.Leaf.Issuer.CommonName))
}

// boundCN bounds a certificate name for a log line.
func boundCN(cn string) string {
	if len(cn) > maxLoggedCN {
		return cn[:maxLoggedCN] + "..."
	}
	return cn
}

// serverConfig is a tls.Config that takes the files as they are at each
// handshake.
func (d *certDir) serverConfig(listener string, protos []string) *tls.Config {
	return &tls.Config{
		MinVersion: tls.VersionTLS12,
		GetConfigForClient: func(*tls.ClientHelloInfo) (*tls.Config, error) {
			cert, pool, err := d.current()
			if err != nil {
				return nil, err
			}
			c := &tls.Config{MinVersion: tls.VersionTLS12, Certificates: []tls.Certificate{*cert}, NextProtos: protos}
			if d.requireClient {
				c.ClientAuth = tls.RequireAndVerifyClientCert
				c.ClientCAs = pool
				// Called once the client's chain is verified.
				c.VerifyConnection = func(cs tls.ConnectionState) error {
					if len(cs.PeerCertificates) > 0 {
						d.logf("%s: accepted client certificate CN=%q", listener, boundCN(cs.PeerCertificates[0].Subject.CommonName))
					}
					return nil
				}
			}
			return c, nil
		},
	}
}
