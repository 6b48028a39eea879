//go:build integration

package integration

import (
	"context"
	"encoding/pem"
	"fmt"
	"net"
	"os"
	"path/filepath"

	authenticationv1 "k8s.io/api/authentication/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	certutil "k8s.io/client-go/util/cert"
)

// scraperNamespace holds the tests' scraper service accounts.
const scraperNamespace = "probed-system"

// readerToken returns a token of service account name (created if missing)
// after binding it to clusterRoles, as an operator grants deploy/'s
// scraper roles; no roles, no grant.
func readerToken(ctx context.Context, name string, clusterRoles ...string) (string, error) {
	if err := cp.EnsureServiceAccount(ctx, scraperNamespace, name); err != nil {
		return "", err
	}
	for _, role := range clusterRoles {
		_, err := client.RbacV1().ClusterRoleBindings().Create(ctx, &rbacv1.ClusterRoleBinding{
			ObjectMeta: metav1.ObjectMeta{Name: name + "-" + role},
			RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role},
			Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: scraperNamespace, Name: name}},
		}, metav1.CreateOptions{})
		if err != nil && !apierrors.IsAlreadyExists(err) {
			return "", fmt.Errorf("binding %s to %s: %w", name, role, err)
		}
	}
	// `kubectl create token --audience probed`: for probed's audience
	// (--endpoint-token-audiences).
	return accountToken(ctx, name, "probed")
}

// accountToken returns a token of service account name in
// scraperNamespace, long enough for the whole tier, for audiences (none:
// the API server's own).
func accountToken(ctx context.Context, name string, audiences ...string) (string, error) {
	tr, err := client.CoreV1().ServiceAccounts(scraperNamespace).CreateToken(ctx, name, &authenticationv1.TokenRequest{
		Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: new(int64(6 * 3600)), Audiences: audiences},
	}, metav1.CreateOptions{})
	if err != nil {
		return "", fmt.Errorf("token for %s: %w", name, err)
	}
	return tr.Status.Token, nil
}

// testCert is a serving certificate for 127.0.0.1 and the CA that signed it.
type testCert struct {
	certFile, keyFile, caFile string
}

// args are probed's flags to serve with it.
func (c testCert) args() []string {
	return []string{"--tls-cert-file=" + c.certFile, "--tls-private-key-file=" + c.keyFile}
}

// newTestCert writes a CA and a certificate it signed for 127.0.0.1 (and
// localhost) into dir, with client-go's generator.
func newTestCert(dir string) (testCert, error) {
	chain, key, err := certutil.GenerateSelfSignedCertKey("probed.test", []net.IP{net.ParseIP("127.0.0.1")}, []string{"localhost"})
	if err != nil {
		return testCert{}, err
	}
	// The chain is the certificate, then its CA.
	leaf, rest := pem.Decode(chain)
	ca, _ := pem.Decode(rest)
	if leaf == nil || ca == nil {
		return testCert{}, fmt.Errorf("generated certificate chain has no CA")
	}
	c := testCert{
		certFile: filepath.Join(dir, "serving.crt"),
		keyFile:  filepath.Join(dir, "serving.key"),
		caFile:   filepath.Join(dir, "serving-ca.crt"),
	}
	for f, b := range map[string][]byte{c.certFile: chain, c.keyFile: key, c.caFile: pem.EncodeToMemory(ca)} {
		if err := os.WriteFile(f, b, 0o600); err != nil {
			return testCert{}, err
		}
	}
	return c, nil
}
