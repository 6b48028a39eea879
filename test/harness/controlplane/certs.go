package controlplane

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"time"
)

// pki holds the certificates of one control plane. ECDSA P-256 keys are used
// throughout because generating them is instant; RSA-2048 would add about
// 100 ms per key to every Start.
type pki struct {
	caCert *x509.Certificate
	caKey  crypto.Signer
	caPEM  []byte

	// Files passed to kube-apiserver, and embedded in the kubeconfig.
	caFile, servingCertFile, servingKeyFile     string
	saKeyFile, saPubFile                        string
	kubeletClientCertFile, kubeletClientKeyFile string

	adminCertPEM, adminKeyPEM []byte
}

// newPKI creates a CA and every certificate and key the apiserver needs, in dir.
func newPKI(dir string) (*pki, error) {
	caKey, err := newKey()
	if err != nil {
		return nil, err
	}
	now := time.Now()
	caTmpl := &x509.Certificate{
		SerialNumber:          serial(),
		Subject:               pkix.Name{CommonName: "probed-test-ca"},
		NotBefore:             now.Add(-time.Hour), // tolerate clock skew between processes
		NotAfter:              now.Add(7 * 24 * time.Hour),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, caKey.Public(), caKey)
	if err != nil {
		return nil, fmt.Errorf("create CA: %w", err)
	}
	caCert, err := x509.ParseCertificate(caDER)
	if err != nil {
		return nil, err
	}
	p := &pki{caCert: caCert, caKey: caKey, caPEM: certPEM(caDER)}

	p.caFile = filepath.Join(dir, "ca.crt")
	if err := os.WriteFile(p.caFile, p.caPEM, 0o644); err != nil {
		return nil, err
	}

	// The serving cert also names the in-cluster service, so a pod-side
	// client using the kubernetes Service (e2e tier) can verify it.
	servingCert, servingKey, err := p.issue(&x509.Certificate{
		Subject:     pkix.Name{CommonName: "kube-apiserver"},
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		DNSNames: []string{"localhost", "kubernetes", "kubernetes.default", "kubernetes.default.svc",
			"kubernetes.default.svc.cluster.local"},
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1"), net.IPv6loopback, net.ParseIP(firstServiceIP)},
	})
	if err != nil {
		return nil, err
	}
	p.servingCertFile, p.servingKeyFile, err = writePair(dir, "apiserver", servingCert, servingKey)
	if err != nil {
		return nil, err
	}

	// The apiserver's identity towards kubelets (logs, exec), for the e2e tier.
	kc, kk, err := p.issueClientCert("kube-apiserver-kubelet-client", "system:masters")
	if err != nil {
		return nil, err
	}
	p.kubeletClientCertFile, p.kubeletClientKeyFile, err = writePair(dir, "apiserver-kubelet-client", kc, kk)
	if err != nil {
		return nil, err
	}

	p.adminCertPEM, p.adminKeyPEM, err = p.issueClientCert("probed-test-admin", "system:masters")
	if err != nil {
		return nil, err
	}

	saKey, err := newKey()
	if err != nil {
		return nil, err
	}
	saKeyPEM, err := keyPEM(saKey)
	if err != nil {
		return nil, err
	}
	saPubDER, err := x509.MarshalPKIXPublicKey(saKey.Public())
	if err != nil {
		return nil, err
	}
	p.saKeyFile = filepath.Join(dir, "sa.key")
	p.saPubFile = filepath.Join(dir, "sa.pub")
	if err := os.WriteFile(p.saKeyFile, saKeyPEM, 0o600); err != nil {
		return nil, err
	}
	if err := os.WriteFile(p.saPubFile, pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: saPubDER}), 0o644); err != nil {
		return nil, err
	}
	return p, nil
}

// issueClientCert signs a client certificate for user cn in groups orgs
// (e.g. "system:node:127.0.0.1", "system:nodes" for a kubelet). It returns
// PEM-encoded certificate and key.
func (p *pki) issueClientCert(cn string, orgs ...string) (certPEM, keyPEM []byte, err error) {
	return p.issue(&x509.Certificate{
		Subject:     pkix.Name{CommonName: cn, Organization: orgs},
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	})
}

// issue fills in the common fields of tmpl, signs it with the CA and returns
// the PEM-encoded certificate and a fresh key.
func (p *pki) issue(tmpl *x509.Certificate) ([]byte, []byte, error) {
	key, err := newKey()
	if err != nil {
		return nil, nil, err
	}
	now := time.Now()
	tmpl.SerialNumber = serial()
	tmpl.NotBefore = now.Add(-time.Hour)
	tmpl.NotAfter = now.Add(7 * 24 * time.Hour)
	tmpl.KeyUsage = x509.KeyUsageDigitalSignature
	der, err := x509.CreateCertificate(rand.Reader, tmpl, p.caCert, key.Public(), p.caKey)
	if err != nil {
		return nil, nil, fmt.Errorf("sign %q: %w", tmpl.Subject.CommonName, err)
	}
	kp, err := keyPEM(key)
	if err != nil {
		return nil, nil, err
	}
	return certPEM(der), kp, nil
}

func newKey() (*ecdsa.PrivateKey, error) {
	return ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
}

func serial() *big.Int {
	n, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 126))
	if err != nil {
		panic(err) // crypto/rand does not fail on Linux
	}
	return n
}

func certPEM(der []byte) []byte {
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
}

func keyPEM(key *ecdsa.PrivateKey) ([]byte, error) {
	der, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return nil, err
	}
	return pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: der}), nil
}

func writePair(dir, name string, cert, key []byte) (certFile, keyFile string, err error) {
	certFile = filepath.Join(dir, name+".crt")
	keyFile = filepath.Join(dir, name+".key")
	if err := os.WriteFile(certFile, cert, 0o644); err != nil {
		return "", "", err
	}
	if err := os.WriteFile(keyFile, key, 0o600); err != nil {
		return "", "", err
	}
	return certFile, keyFile, nil
}
