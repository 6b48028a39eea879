package node

import (
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net/http"
	"os"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// ScraperAccount is the service account (in probed's namespace) whose token
// the harness reads probed's /metrics and /debug/probes with. ProbedToken
// binds it to deploy/scraper-roles.yaml's two roles.
const ScraperAccount = "probed-harness-scraper"

// scraperRoles are the ClusterRoles of deploy/scraper-roles.yaml.
var scraperRoles = []string{"probed-metrics-reader", "probed-debug-reader"}

// ProbedToken returns a token probed lets read /metrics and /debug/probes,
// valid for ttl: the ScraperAccount's, bound to deploy/'s scraper roles
// (created if missing), as `kubectl create token --audience probed` would
// issue it. Call it after DeployProbed, which applies the roles.
func (n *Node) ProbedToken(ctx context.Context, ttl time.Duration) (string, error) {
	ns := n.ProbedNamespace()
	_, err := n.client.CoreV1().ServiceAccounts(ns).Create(ctx, &corev1.ServiceAccount{
		ObjectMeta: metav1.ObjectMeta{Name: ScraperAccount},
	}, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		return "", fmt.Errorf("service account %s/%s: %w", ns, ScraperAccount, err)
	}
	for _, role := range scraperRoles {
		_, err := n.client.RbacV1().ClusterRoleBindings().Create(ctx, &rbacv1.ClusterRoleBinding{
			ObjectMeta: metav1.ObjectMeta{Name: ScraperAccount + "-" + role},
			RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role},
			Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: ns, Name: ScraperAccount}},
		}, metav1.CreateOptions{})
		if err != nil && !apierrors.IsAlreadyExists(err) {
			return "", fmt.Errorf("binding %s to %s: %w", ScraperAccount, role, err)
		}
	}
	secs := int64(ttl / time.Second)
	// For probed's audience: probed refuses tokens for the API server's on
	// /debug/ (--endpoint-token-audiences).
	tr, err := n.client.CoreV1().ServiceAccounts(ns).CreateToken(ctx, ScraperAccount, &authenticationv1.TokenRequest{
		Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: &secs, Audiences: []string{"probed"}},
	}, metav1.CreateOptions{})
	if err != nil {
		return "", fmt.Errorf("token for %s/%s: %w", ns, ScraperAccount, err)
	}
	return tr.Status.Token, nil
}

// WriteProbedToken writes a ProbedToken valid for ttl to path (mode 0600),
// for curl and Prometheus (authorization.credentials_file).
func (n *Node) WriteProbedToken(ctx context.Context, path string, ttl time.Duration) error {
	token, err := n.ProbedToken(ctx, ttl)
	if err != nil {
		return err
	}
	return os.WriteFile(path, []byte(token), 0o600)
}

// ProbedGet GETs path (e.g. /metrics) from probed's endpoint over TLS with a
// fresh ProbedToken, accepting probed's self-signed certificate, and
// returns the body of a 200 answer.
func (n *Node) ProbedGet(ctx context.Context, path string) ([]byte, error) {
	token, err := n.ProbedToken(ctx, 10*time.Minute)
	if err != nil {
		return nil, err
	}
	return FetchProbed(ctx, n.ProbedMetricsURL()+path, token)
}

// FetchProbed GETs url with token ("": none) as probed's scrapers do: over
// TLS that accepts probed's self-signed certificate (deploy/monitoring's
// PodMonitor does the same). It returns the body of a 200 answer.
func FetchProbed(ctx context.Context, url, token string) ([]byte, error) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, err
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	tr := &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}
	defer tr.CloseIdleConnections()
	resp, err := (&http.Client{Transport: tr}).Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	if err == nil && resp.StatusCode != http.StatusOK {
		err = fmt.Errorf("GET %s: %s: %.200s", url, resp.Status, b)
	}
	return b, err
}
