package endpoints

import (
	"fmt"
	"net/http"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apiserver/pkg/apis/apiserver"
	"k8s.io/apiserver/pkg/authentication/authenticator"
	"k8s.io/apiserver/pkg/authentication/authenticatorfactory"
	"k8s.io/apiserver/pkg/authorization/authorizer"
	"k8s.io/apiserver/pkg/authorization/authorizerfactory"
	"k8s.io/apiserver/pkg/endpoints/filters"
	"k8s.io/apiserver/pkg/endpoints/request"
	"k8s.io/client-go/kubernetes/scheme"
	authenticationv1 "k8s.io/client-go/kubernetes/typed/authentication/v1"
	authorizationv1 "k8s.io/client-go/kubernetes/typed/authorization/v1"
)

// Auth guards /metrics and /debug/: who the caller is, and whether they may
// get the path. Kubernetes components use the same pair (the kubelet,
// kube-scheduler and controller-runtime's metrics server among them).
type Auth struct {
	Authenticator authenticator.Request
	Authorizer    authorizer.Authorizer
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

// DelegatedAuth asks the API server: a TokenReview for the bearer token, a
// SubjectAccessReview for the non-resource path and the request's verb (get
// for GET). No token, an unknown token, or an API server that cannot be
// reached is 401; a token without the grant is 403.
func DelegatedAuth(authn authenticationv1.AuthenticationV1Interface, authz authorizationv1.AuthorizationV1Interface) (Auth, error) {
	a, _, err := authenticatorfactory.DelegatingAuthenticatorConfig{
		Anonymous:                &apiserver.AnonymousAuthConfig{Enabled: false},
		TokenAccessReviewClient:  authn,
		TokenAccessReviewTimeout: reviewTimeout,
		WebhookRetryBackoff:      reviewBackoff(),
		CacheTTL:                 tokenReviewCacheTTL,
	}.New()
	if err != nil {
		return Auth{}, fmt.Errorf("delegated authentication: %w", err)
	}
	z, err := authorizerfactory.DelegatingAuthorizerConfig{
		SubjectAccessReviewClient: authz,
		AllowCacheTTL:             accessAllowCacheTTL,
		DenyCacheTTL:              accessDenyCacheTTL,
		WebhookRetryBackoff:       reviewBackoff(),
	}.New()
	if err != nil {
		return Auth{}, fmt.Errorf("delegated authorization: %w", err)
	}
	return Auth{Authenticator: a, Authorizer: z}, nil
}

// guard returns the wrapper for guarded paths: k8s.io/apiserver's filters,
// request info (every path here is a non-resource URL), authentication,
// then authorization, behind a cap of maxUnauthenticated requests in flight
// not yet authorized (0: none), which every guarded path shares.
func (a Auth) guard(maxUnauthenticated int64) func(http.Handler) http.Handler {
	var limit *unauthenticatedCap
	if maxUnauthenticated > 0 {
		limit = newUnauthenticatedCap(maxUnauthenticated)
	}
	return func(h http.Handler) http.Handler {
		h = filters.WithAuthorization(authorized(h), a.Authorizer, scheme.Codecs)
		h = filters.WithAuthentication(h, a.Authenticator, filters.Unauthorized(scheme.Codecs), nil, nil)
		h = filters.WithRequestInfo(h, &request.RequestInfoFactory{})
		if limit != nil {
			h = limit.wrap(h)
		}
		return h
	}
}
