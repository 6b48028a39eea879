package probedclient

import (
	"context"
	"fmt"
	"net/http"
	"sync"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/clock"
)

// Defaults of deploy/kubectl-plugin.yaml and probed's --endpoint-token-audiences.
const (
	DefaultServiceAccount = "probed-plugin"
	DefaultAudience       = "probed"
	// tokenLifetime is the API server's shortest.
	tokenLifetime = 10 * time.Minute
	// renewBefore is how long before its expiry a token is not used again.
	renewBefore = time.Minute
)

// TokenOptions say whose token the client shows probed.
type TokenOptions struct {
	// Namespace and ServiceAccount name the account the token is issued
	// for (probed's namespace, DefaultServiceAccount).
	Namespace, ServiceAccount string
	// Audience is the token's audience: probed's --endpoint-token-audiences.
	Audience string
}

// Tokens issues, through the API server and as the caller, short-lived
// tokens of one service account for probed's audience (TokenRequest), and
// hands out the same one until it nears its expiry. The caller's own
// credentials (a token, an exec or OIDC plugin, a client certificate) go
// to the API server alone, never to a node: what a node sees is good for
// nothing but probed's endpoints, for minutes. Any user the API server
// knows may be a caller, client certificates included; it needs create on
// that account's serviceaccounts/token (deploy/kubectl-plugin.yaml).
type Tokens struct {
	client kubernetes.Interface
	o      TokenOptions
	clock  clock.PassiveClock

	mu      sync.Mutex
	token   string
	expires time.Time
}

// NewTokens issues tokens through client, as its user.
func NewTokens(client kubernetes.Interface, o TokenOptions, clk clock.PassiveClock) *Tokens {
	return &Tokens{client: client, o: o, clock: clk}
}

// Token returns a valid token, issuing one if needed.
func (t *Tokens) Token(ctx context.Context) (string, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.token != "" && t.clock.Now().Before(t.expires.Add(-renewBefore)) {
		return t.token, nil
	}
	secs := int64(tokenLifetime / time.Second)
	tr, err := t.client.CoreV1().ServiceAccounts(t.o.Namespace).CreateToken(ctx, t.o.ServiceAccount, &authenticationv1.TokenRequest{
		Spec: authenticationv1.TokenRequestSpec{Audiences: []string{t.o.Audience}, ExpirationSeconds: &secs},
	}, metav1.CreateOptions{})
	if err != nil {
		return "", fmt.Errorf("issuing a token of service account %s/%s for probed (audience %q): %w%s",
			t.o.Namespace, t.o.ServiceAccount, t.o.Audience, err, RoleHint(err))
	}
	t.token, t.expires = tr.Status.Token, tr.Status.ExpirationTimestamp.Time
	return t.token, nil
}

// tokenTransport sends each request to probed with a token from tokens,
// and nothing else of the caller's.
type tokenTransport struct {
	tokens *Tokens
	next   http.RoundTripper
}

func (t tokenTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	token, err := t.tokens.Token(r.Context())
	if err != nil {
		return nil, err
	}
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+token)
	return t.next.RoundTrip(r)
}
