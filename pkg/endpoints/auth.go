package endpoints

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/rest"
	"k8s.io/klog/v2"

	"github.com/probed-dev/probed/pkg/kubeclient"
)

// Auth guards /metrics and /debug/: who the caller is (a TokenReview), and
// whether they may get the path (a SubjectAccessReview). Kubernetes
// components use the same pair (the kubelet, kube-scheduler and
// controller-runtime's metrics server among them); probed asks the API
// server itself rather than through k8s.io/apiserver's filters, whose
// closure registers every API group and cost every node ~19 MiB of RSS
// (docs/benchmarks/footprint.md).
type Auth struct {
	// Authenticator authenticates callers of /debug/ and /readyz?verbose.
	Authenticator Authenticator
	// MetricsAuthenticator authenticates /metrics' callers; nil: Authenticator.
	MetricsAuthenticator Authenticator
	Authorizer           Authorizer
}

// UserInfo is a caller as the API server's TokenReview named it.
type UserInfo struct {
	Name, UID string
	Groups    []string
	Extra     map[string][]string
}

// Authenticator says who sent r. No credentials, or credentials the API
// server does not accept, is (nil, false, nil); err is for a review that
// could not be made.
type Authenticator interface {
	AuthenticateRequest(r *http.Request) (*UserInfo, bool, error)
}

// Attributes are what a caller asks to do: always a non-resource path.
type Attributes struct {
	User *UserInfo
	// Verb is the request's method in lower case, as the API server's
	// request info names a non-resource request's verb.
	Verb, Path string
}

// Authorizer says whether a caller may do what it asks, and if not, why.
type Authorizer interface {
	Authorize(ctx context.Context, a Attributes) (allowed bool, reason string, err error)
}

// DefaultAudience is the audience the kubectl plugin's tokens are issued
// for, and the one probed accepts by default.
const DefaultAudience = "probed"

// AuthOptions say which tokens DelegatedAuth accepts, and how many reviews
// may be in flight.
type AuthOptions struct {
	// Audiences: a token must be issued for one of them (TokenReview
	// spec.audiences). A token the API server accepts for itself, as an
	// operator's own, is refused: probed never needs one.
	Audiences []string
	// MetricsAPIServerTokens lets /metrics also accept tokens issued for
	// the API server's own audiences: a Prometheus Operator PodMonitor can
	// only send a Secret's token, which has no other audience.
	MetricsAPIServerTokens bool
	// MaxTokenReviews and MaxAccessReviews cap the TokenReviews, and apart
	// from them the SubjectAccessReviews, in flight; a caller that needs
	// one more gets 429. Callers whose answers are cached never count.
	// DefaultMaxReviewsInFlight when 0.
	MaxTokenReviews, MaxAccessReviews int
}

// Cache lifetimes of delegated decisions: controller-runtime's metrics
// filter's (the kubelet's are alike: 2m, 5m, 30s). A scrape every 30s then
// costs the API server one TokenReview a minute and one SubjectAccessReview
// every five, per node; a revoked grant stops working within five minutes.
const (
	tokenReviewCacheTTL = time.Minute
	accessAllowCacheTTL = 5 * time.Minute
	accessDenyCacheTTL  = 30 * time.Second
	reviewTimeout       = 10 * time.Second
	// Cached answers, each kind: past them the least recently used goes.
	// A few hundred bytes each; made-up tokens cannot grow them further.
	maxCachedTokens   = 4096
	maxCachedAccesses = 4096
)

// reviewBackoff is k8s.io/apiserver's DefaultAuthWebhookRetryBackoff: about
// 6s of retries before a review that cannot reach the API server fails.
func reviewBackoff() wait.Backoff {
	return wait.Backoff{Duration: 500 * time.Millisecond, Factor: 1.5, Jitter: 0.2, Steps: 5}
}

// DelegatedAuth asks the API server, through a client made from cfg: a
// TokenReview for the bearer token and o.Audiences, a SubjectAccessReview
// for the non-resource path and the request's verb (get for GET). No
// token, an unknown token, a token for another audience, or an API server
// that cannot be reached is 401; a token without the grant is 403.
//
// Answers are cached, and the caps of o apply to cache misses only, each
// review kind with a cap of its own: callers with made-up tokens, however
// many, never make a known caller wait or fail.
func DelegatedAuth(cfg *rest.Config, o AuthOptions) (Auth, error) {
	if len(o.Audiences) == 0 {
		return Auth{}, errors.New("delegated authentication needs at least one token audience")
	}
	// Both review groups share one HTTP client and one rate limit. JSON,
	// as k8s.io/apiserver's review clients send.
	cfg = rest.CopyConfig(cfg)
	cfg.ContentType, cfg.AcceptContentTypes = "application/json", "application/json"
	client, err := kubeclient.NewForConfig(cfg)
	if err != nil {
		return Auth{}, fmt.Errorf("delegated authentication client: %w", err)
	}
	tokens, err := newTokenReviewer(client.AuthenticationV1().TokenReviews(), orDefault(o.MaxTokenReviews, DefaultMaxReviewsInFlight))
	if err != nil {
		return Auth{}, err
	}
	auth := Auth{
		Authenticator: bearer{tokens: tokens, audiences: o.Audiences},
		Authorizer:    newAccessReviewer(client.AuthorizationV1().SubjectAccessReviews(), orDefault(o.MaxAccessReviews, DefaultMaxReviewsInFlight)),
	}
	if o.MetricsAPIServerTokens {
		auth.MetricsAuthenticator = bearer{tokens: tokens, audiences: o.Audiences, apiServerToo: true}
	}
	return auth, nil
}

// guard returns the wrapper for guarded paths: authentication by authn,
// then authorization of the request's verb on its path. A caller refused
// because too many reviews are in flight gets 429; a caller refused for
// any other reason gets its answer on a connection that then closes, so a
// made-up token holds no socket.
func (a Auth) guard(authn Authenticator) func(http.Handler) http.Handler {
	return func(h http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			u, ok, err := authn.AuthenticateRequest(r)
			switch {
			case errors.Is(err, errReviewsBusy):
				tooManyReviews(w, r)
				return
			case err != nil:
				klog.ErrorS(err, "Unable to authenticate an endpoint request", "path", r.URL.Path, "remote", r.RemoteAddr)
				unauthorized(w)
				return
			case !ok:
				// Anyone can send made-up tokens: not worth a line each.
				klog.V(4).InfoS("Endpoint request not authenticated", "path", r.URL.Path, "remote", r.RemoteAddr)
				unauthorized(w)
				return
			}
			// The handlers behind never need the caller's token.
			r.Header.Del("Authorization")
			attrs := Attributes{User: u, Verb: strings.ToLower(r.Method), Path: r.URL.Path}
			allowed, reason, err := a.Authorizer.Authorize(r.Context(), attrs)
			switch {
			case allowed:
				h.ServeHTTP(w, r)
			case errors.Is(err, errReviewsBusy):
				tooManyReviews(w, r)
			case err != nil:
				klog.ErrorS(err, "Unable to authorize an endpoint request", "path", r.URL.Path, "user", u.Name)
				internalError(w, r, err)
			default:
				forbidden(w, attrs, reason)
			}
		})
	}
}

// bearer authenticates the request's bearer token for one of audiences;
// with apiServerToo, failing that, for the API server's own. It adds
// system:authenticated to the caller's groups, as the API server does.
type bearer struct {
	tokens       *tokenReviewer
	audiences    []string
	apiServerToo bool
}

func (b bearer) AuthenticateRequest(r *http.Request) (*UserInfo, bool, error) {
	token, found := bearerToken(r.Header.Get("Authorization"))
	if !found {
		return nil, false, nil
	}
	u, ok, err := b.tokens.review(token, b.audiences)
	if !ok && err == nil && b.apiServerToo {
		// No audiences: the review asks for the API server's own.
		u, ok, err = b.tokens.review(token, nil)
	}
	if !ok {
		return nil, false, err
	}
	return withAuthenticatedGroup(u), true, nil
}

// bearerToken reads "Bearer <token>" (the scheme in any case), as the API
// server's bearer token authenticator does.
func bearerToken(header string) (string, bool) {
	parts := strings.SplitN(strings.TrimSpace(header), " ", 3)
	if len(parts) < 2 || !strings.EqualFold(parts[0], "bearer") || parts[1] == "" {
		return "", false
	}
	return parts[1], true
}

const authenticatedGroup = "system:authenticated"

// withAuthenticatedGroup returns a copy of u in system:authenticated; the
// cached answer is shared and stays as the API server gave it.
func withAuthenticatedGroup(u *UserInfo) *UserInfo {
	c := *u
	if !slices.Contains(c.Groups, authenticatedGroup) {
		c.Groups = append(slices.Clip(c.Groups), authenticatedGroup)
	}
	return &c
}
