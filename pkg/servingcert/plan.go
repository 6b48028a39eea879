package servingcert

import (
	"bytes"
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"errors"
	"fmt"
	"math/big"
	"slices"
	"time"

	certutil "k8s.io/client-go/util/cert"
	"k8s.io/client-go/util/keyutil"
)

// The Secret's keys.
const (
	// CABundleKey holds the PEM CA certificates the API server is to trust:
	// the signing CA first, then earlier CAs until they expire.
	CABundleKey = "ca.crt"
	// CAKeyKey holds the signing CA's private key.
	CAKeyKey = "ca.key"
	// CertKey and KeyKey hold the serving certificate and its key.
	CertKey = "tls.crt"
	KeyKey  = "tls.key"
)

// backdate is how far before "now" a certificate's validity starts, for
// API servers whose clocks run a little behind ours.
const backdate = time.Minute

// Config is what the certificates must be.
type Config struct {
	// DNSNames the serving certificate covers; the first is its common
	// name. The API server checks <service>.<namespace>.svc.
	DNSNames []string
	// CAValidity and CertValidity are how long a new CA and serving
	// certificate are valid. Each is renewed once two thirds of its
	// validity have passed.
	CAValidity, CertValidity time.Duration
}

func (c Config) validate() error {
	if len(c.DNSNames) == 0 {
		return errors.New("no DNS names for the serving certificate")
	}
	if c.CAValidity <= 0 || c.CertValidity <= 0 {
		return fmt.Errorf("validities must be positive (CA %v, certificate %v)", c.CAValidity, c.CertValidity)
	}
	return nil
}

// Change says what plan renewed.
type Change struct {
	// CA: a new signing CA (the old one stays in the bundle until it expires).
	CA bool
	// Cert: a new serving certificate.
	Cert bool
}

// plan returns the Secret data that holds valid certificates at now:
// data itself when it does, else data with what is missing, invalid or due
// for renewal replaced. It never drops a CA from the bundle before that CA
// expires, so a serving certificate it signed keeps verifying while any
// replica still serves it.
func plan(now time.Time, data map[string][]byte, cfg Config) (map[string][]byte, Change, error) {
	var ch Change
	if err := cfg.validate(); err != nil {
		return nil, ch, err
	}
	bundle, _ := certutil.ParseCertsPEM(data[CABundleKey]) // garbage is no CA
	caKey := parseKey(data[CAKeyKey])
	signer := signingCA(now, bundle, caKey)
	if signer == nil {
		var err error
		if signer, caKey, err = newCA(now, cfg.CAValidity); err != nil {
			return nil, ch, err
		}
		ch.CA = true
	}
	// The signer first, then the others still valid, newest first.
	keep := []*x509.Certificate{signer}
	for _, c := range bundle {
		if c.IsCA && now.Before(c.NotAfter) && !c.Equal(signer) && !slices.ContainsFunc(keep, c.Equal) {
			keep = append(keep, c)
		}
	}
	slices.SortStableFunc(keep[1:], func(a, b *x509.Certificate) int { return b.NotAfter.Compare(a.NotAfter) })

	certPEM, keyPEM := data[CertKey], data[KeyKey]
	if ch.CA || !validLeaf(now, certPEM, keyPEM, signer, cfg.DNSNames) {
		var err error
		if certPEM, keyPEM, err = newLeaf(now, cfg, signer, caKey); err != nil {
			return nil, ch, err
		}
		ch.Cert = true
	}
	bundlePEM, err := certutil.EncodeCertificates(keep...)
	if err != nil {
		return nil, ch, err
	}
	caKeyPEM := data[CAKeyKey]
	if ch.CA {
		if caKeyPEM, err = keyutil.MarshalPrivateKeyToPEM(caKey); err != nil {
			return nil, ch, err
		}
	}
	out := map[string][]byte{}
	for k, v := range data {
		out[k] = v
	}
	out[CABundleKey], out[CAKeyKey], out[CertKey], out[KeyKey] = bundlePEM, caKeyPEM, certPEM, keyPEM
	return out, ch, nil
}

// dataEqual reports whether plan changed nothing.
func dataEqual(a, b map[string][]byte) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || !bytes.Equal(v, w) {
			return false
		}
	}
	return true
}

// renewAt is when a certificate is due for renewal: two thirds into the
// validity it was issued with.
func renewAt(c *x509.Certificate) time.Time {
	issued := c.NotBefore.Add(backdate)
	return issued.Add(c.NotAfter.Sub(issued) * 2 / 3)
}

// signingCA is the CA of bundle whose key is key, if it is valid and not
// due for renewal at now.
func signingCA(now time.Time, bundle []*x509.Certificate, key crypto.Signer) *x509.Certificate {
	if key == nil {
		return nil
	}
	for _, c := range bundle {
		if c.IsCA && c.BasicConstraintsValid && samePublicKey(c.PublicKey, key.Public()) &&
			!now.Before(c.NotBefore) && now.Before(renewAt(c)) {
			return c
		}
	}
	return nil
}

// validLeaf reports whether certPEM and keyPEM are a pair that signer
// signed for every one of names, valid at now and not due for renewal.
func validLeaf(now time.Time, certPEM, keyPEM []byte, signer *x509.Certificate, names []string) bool {
	pair, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		return false
	}
	leaf, err := x509.ParseCertificate(pair.Certificate[0])
	if err != nil || !now.Before(renewAt(leaf)) {
		return false
	}
	roots := x509.NewCertPool()
	roots.AddCert(signer)
	for _, n := range names {
		if _, err := leaf.Verify(x509.VerifyOptions{DNSName: n, Roots: roots, CurrentTime: now,
			KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}); err != nil {
			return false
		}
	}
	return true
}

func newCA(now time.Time, validity time.Duration) (*x509.Certificate, crypto.Signer, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber:          serial(),
		Subject:               pkix.Name{CommonName: fmt.Sprintf("probed-webhook-ca@%d", now.Unix())},
		NotBefore:             now.Add(-backdate),
		NotAfter:              now.Add(validity),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
		IsCA:                  true,
		MaxPathLenZero:        true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, key.Public(), key)
	if err != nil {
		return nil, nil, err
	}
	c, err := x509.ParseCertificate(der)
	return c, key, err
}

func newLeaf(now time.Time, cfg Config, ca *x509.Certificate, caKey crypto.Signer) (certPEM, keyPEM []byte, err error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, err
	}
	notAfter := now.Add(cfg.CertValidity)
	if notAfter.After(ca.NotAfter) {
		notAfter = ca.NotAfter // never outlive the CA that vouches for it
	}
	tmpl := &x509.Certificate{
		SerialNumber: serial(),
		Subject:      pkix.Name{CommonName: cfg.DNSNames[0]},
		DNSNames:     cfg.DNSNames,
		NotBefore:    now.Add(-backdate),
		NotAfter:     notAfter,
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, key.Public(), caKey)
	if err != nil {
		return nil, nil, err
	}
	c, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, nil, err
	}
	if certPEM, err = certutil.EncodeCertificates(c); err != nil {
		return nil, nil, err
	}
	keyPEM, err = keyutil.MarshalPrivateKeyToPEM(key)
	return certPEM, keyPEM, err
}

func parseKey(pemBytes []byte) crypto.Signer {
	k, err := keyutil.ParsePrivateKeyPEM(pemBytes)
	if err != nil {
		return nil
	}
	s, _ := k.(crypto.Signer)
	return s
}

func samePublicKey(a, b crypto.PublicKey) bool {
	ea, ok := a.(interface{ Equal(crypto.PublicKey) bool })
	return ok && ea.Equal(b)
}

func serial() *big.Int {
	n, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	if err != nil {
		panic(err) // crypto/rand does not fail
	}
	return n.Add(n, big.NewInt(1))
}
