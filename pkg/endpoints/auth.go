package endpoints

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apiserver/pkg/authentication/authenticator"
	"k8s.io/apiserver/pkg/authentication/authenticatorfactory"
	"k8s.io/apiserver/pkg/authentication/group"
	"k8s.io/apiserver/pkg/authentication/request/bearertoken"
	"k8s.io/apiserver/pkg/authentication/token/cache"
	"k8s.io/apiserver/pkg/authorization/authorizer"
	"k8s.io/apiserver/pkg/authorization/authorizerfactory"
	"k8s.io/apiserver/pkg/endpoints/filters"
	"k8s.io/apiserver/pkg/endpoints/handlers/responsewriters"
	"k8s.io/apiserver/pkg/endpoints/request"
	webhooktoken "k8s.io/apiserver/plugin/pkg/authenticator/token/webhook"
	"k8s.io/client-go/kubernetes/scheme"
	authenticationv1client "k8s.io/client-go/kubernetes/typed/authentication/v1"
	authorizationv1client "k8s.io/client-go/kubernetes/typed/authorization/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/flowcontrol"
)

// Auth guards /metrics and /debug/: who the caller is, and whether they may
// get the path. Kubernetes components use the same pair (the kubelet,
// kube-scheduler and controller-runtime's metrics server among them).
type Auth struct {
	// Authenticator authenticates callers of /debug/ and /readyz?verbose.
	Authenticator authenticator.Request
	// MetricsAuthenticator authenticates /metrics' callers; nil: Authenticator.
	MetricsAuthenticator authenticator.Request
	Authorizer           authorizer.Authorizer
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
)

// reviewBackoff is k8s.io/apiserver's DefaultAuthWebhookRetryBackoff: about
// 6s of retries before a review that cannot reach the API server fails.
func reviewBackoff() *wait.Backoff {
	return &wait.Backoff{Duration: 500 * time.Millisecond, Factor: 1.5, Jitter: 0.2, Steps: 5}
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
	cfg = rest.CopyConfig(cfg)
	accessReviews := newReviewCap(orDefault(o.MaxAccessReviews, DefaultMaxReviewsInFlight))
	cfg.Wrap(accessReviews.wrapTransport)
	// The two review groups' clients only (a whole clientset links every
	// API group's client: docs/benchmarks/footprint.md), sharing one HTTP
	// client and one rate limit, as a clientset's groups do.
	if cfg.RateLimiter == nil && cfg.QPS > 0 {
		cfg.RateLimiter = flowcontrol.NewTokenBucketRateLimiter(cfg.QPS, cfg.Burst)
	}
	httpClient, err := rest.HTTPClientFor(cfg)
	if err != nil {
		return Auth{}, fmt.Errorf("delegated authentication client: %w", err)
	}
	authn, err := authenticationv1client.NewForConfigAndClient(cfg, httpClient)
	if err != nil {
		return Auth{}, fmt.Errorf("delegated authentication client: %w", err)
	}
	authz, err := authorizationv1client.NewForConfigAndClient(cfg, httpClient)
	if err != nil {
		return Auth{}, fmt.Errorf("delegated authorization client: %w", err)
	}
	authenticatorfactory.RegisterMetrics()
	// No implicit audiences: a TokenReview answer that names no audience
	// is not one of ours.
	review, err := webhooktoken.NewFromInterface(authn, nil, *reviewBackoff(), reviewTimeout, webhooktoken.AuthenticatorMetrics{
		RecordRequestTotal:   authenticatorfactory.RecordRequestTotal,
		RecordRequestLatency: authenticatorfactory.RecordRequestLatency,
	})
	if err != nil {
		return Auth{}, fmt.Errorf("delegated authentication: %w", err)
	}
	tokenReviews := newReviewCap(orDefault(o.MaxTokenReviews, DefaultMaxReviewsInFlight))
	// The cap sits behind the cache: a known token never meets it.
	cached := cache.New(tokenReviews.wrapToken(review), false, tokenReviewCacheTTL, tokenReviewCacheTTL)
	auth := Auth{Authenticator: bearer(audienceToken{cached: cached, audiences: o.Audiences})}
	if o.MetricsAPIServerTokens {
		auth.MetricsAuthenticator = bearer(audienceToken{cached: cached, audiences: o.Audiences, apiServerToo: true})
	}
	auth.Authorizer, err = authorizerfactory.DelegatingAuthorizerConfig{
		SubjectAccessReviewClient: authz,
		AllowCacheTTL:             accessAllowCacheTTL,
		DenyCacheTTL:              accessDenyCacheTTL,
		WebhookRetryBackoff:       reviewBackoff(),
	}.New()
	if err != nil {
		return Auth{}, fmt.Errorf("delegated authorization: %w", err)
	}
	return auth, nil
}

func bearer(t authenticator.Token) authenticator.Request {
	return group.NewAuthenticatedGroupAdder(bearertoken.New(t))
}

// audienceToken authenticates a token for one of audiences; with
// apiServerToo, failing that, for the API server's own.
type audienceToken struct {
	cached       authenticator.Token
	audiences    authenticator.Audiences
	apiServerToo bool
}

func (a audienceToken) AuthenticateToken(ctx context.Context, token string) (*authenticator.Response, bool, error) {
	resp, ok, err := a.cached.AuthenticateToken(authenticator.WithAudiences(ctx, a.audiences), token)
	if ok && len(a.audiences.Intersect(resp.Audiences)) == 0 {
		resp, ok = nil, false
	}
	if ok || err != nil || !a.apiServerToo {
		return resp, ok, err
	}
	// The request's context carries no audiences (guard sets none), so
	// this TokenReview asks for the API server's own.
	return a.cached.AuthenticateToken(ctx, token)
}

// guard returns the wrapper for guarded paths: k8s.io/apiserver's filters,
// request info (every path here is a non-resource URL), authentication by
// authn, then authorization. A caller refused because too many reviews are
// in flight gets 429; a caller refused for any other reason gets its
// answer on a connection that then closes, so a made-up token holds no
// socket.
func (a Auth) guard(authn authenticator.Request) func(http.Handler) http.Handler {
	return func(h http.Handler) http.Handler {
		h = authorize(h, a.Authorizer)
		h = filters.WithAuthentication(h, busyAware{authn}, http.HandlerFunc(unauthorized), nil, nil)
		h = filters.WithRequestInfo(h, &request.RequestInfoFactory{})
		return withReviewState(h)
	}
}

// unauthorized answers a caller that did not authenticate.
func unauthorized(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Connection", "close")
	if reviewsBusy(r.Context()) {
		tooManyReviews(w, r)
		return
	}
	filters.Unauthorized(scheme.Codecs).ServeHTTP(w, r)
}

// authorize is filters.WithAuthorization, but a review refused for want of
// capacity is 429, not 500.
func authorize(h http.Handler, z authorizer.Authorizer) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		attrs, err := filters.GetAuthorizerAttributes(r.Context())
		if err != nil {
			responsewriters.InternalError(w, r, err)
			return
		}
		decision, reason, err := z.Authorize(r.Context(), attrs)
		switch {
		case decision == authorizer.DecisionAllow:
			h.ServeHTTP(w, r)
		case errors.Is(err, errReviewsBusy) || reviewsBusy(r.Context()):
			w.Header().Set("Connection", "close")
			tooManyReviews(w, r)
		case err != nil:
			responsewriters.InternalError(w, r, err)
		default:
			w.Header().Set("Connection", "close")
			responsewriters.Forbidden(attrs, w, r, reason, scheme.Codecs)
		}
	})
}
