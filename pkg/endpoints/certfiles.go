package endpoints

import (
	"bytes"
	"context"
	"crypto/tls"
	"fmt"
	"os"
	"sync/atomic"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/klog/v2"
)

// certReloadInterval is how often certFiles looks at its files. A
// cert-manager or kubelet-projected Secret changes every few weeks; a
// handshake within seconds of a change may still get the old certificate,
// which stays valid for its overlap.
const certReloadInterval = 5 * time.Second

// certFiles serves a certificate and key read from two files, and reads
// them again when either changes. A pair that does not load (written half
// way, or a key that does not match) keeps the last good one in service,
// with one log line per bad pair, until a good pair is written.
type certFiles struct {
	certFile, keyFile string
	current           atomic.Pointer[tls.Certificate]
	// certPEM and keyPEM are what the last look read (run's goroutine
	// only); lastErr the last bad pair's error, logged once.
	certPEM, keyPEM []byte
	lastErr         string
}

// newCertFiles loads the pair, or says why it cannot.
func newCertFiles(certFile, keyFile string) (*certFiles, error) {
	f := &certFiles{certFile: certFile, keyFile: keyFile}
	changed, err := f.reload()
	if err != nil {
		return nil, fmt.Errorf("loading the serving certificate %s and key %s: %w", certFile, keyFile, err)
	}
	if !changed {
		return nil, fmt.Errorf("loading the serving certificate %s and key %s", certFile, keyFile)
	}
	return f, nil
}

func (f *certFiles) get(*tls.ClientHelloInfo) (*tls.Certificate, error) {
	return f.current.Load(), nil
}

// run looks at the files every interval until ctx ends.
func (f *certFiles) run(ctx context.Context, interval time.Duration) {
	wait.UntilWithContext(ctx, f.look, interval)
}

// look reloads the files, logging a change and, once, a bad pair.
func (f *certFiles) look(context.Context) {
	changed, err := f.reload()
	switch {
	case err != nil && err.Error() != f.lastErr:
		f.lastErr = err.Error()
		klog.ErrorS(err, "Serving certificate files changed but do not load; serving the previous certificate", "cert", f.certFile, "key", f.keyFile)
	case err == nil && changed:
		f.lastErr = ""
		klog.InfoS("Serving certificate reloaded", "cert", f.certFile, "key", f.keyFile)
	}
}

// reload reads both files and, if either changed and the pair loads,
// serves it. Two small reads every few seconds cost less than watching:
// a Secret volume swaps a symlink over a directory, which file watches
// follow badly.
func (f *certFiles) reload() (changed bool, err error) {
	certPEM, err := os.ReadFile(f.certFile)
	if err != nil {
		return false, err
	}
	keyPEM, err := os.ReadFile(f.keyFile)
	if err != nil {
		return false, err
	}
	if bytes.Equal(certPEM, f.certPEM) && bytes.Equal(keyPEM, f.keyPEM) && f.current.Load() != nil {
		return false, nil
	}
	pair, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		return false, err
	}
	f.certPEM, f.keyPEM = certPEM, keyPEM
	f.current.Store(&pair)
	return true, nil
}
