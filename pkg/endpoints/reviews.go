package endpoints

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"slices"

	"golang.org/x/sync/singleflight"
	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/cache"
	utilnet "k8s.io/apimachinery/pkg/util/net"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/probed-dev/probed/pkg/kubeclient"
)

// tokenReviewer asks the API server who a bearer token is, and remembers
// the answer for tokenReviewCacheTTL. It keeps what k8s.io/apiserver's
// cached webhook token authenticator promises: tokens are kept only as
// keyed hashes; callers of the same token share one review, made in a
// context of its own so one caller going away does not fail the others;
// an error is never cached, so an API server back from an outage is asked
// again at once. Only a review it sends holds a place of its cap.
type tokenReviewer struct {
	client  kubeclient.TokenReviewInterface
	places  *reviewCap
	answers *cache.LRUExpireCache
	inAir   singleflight.Group
	hashKey []byte
}

// tokenAnswer is a review's answer: a user, or none (not authenticated).
type tokenAnswer struct{ user *UserInfo }

func newTokenReviewer(client kubeclient.TokenReviewInterface, maxInFlight int) (*tokenReviewer, error) {
	key := make([]byte, 32)
	if _, err := rand.Read(key); err != nil {
		return nil, fmt.Errorf("token cache key: %w", err)
	}
	return &tokenReviewer{
		client:  client,
		places:  newReviewCap(maxInFlight),
		answers: cache.NewLRUExpireCache(maxCachedTokens),
		hashKey: key,
	}, nil
}

// review authenticates token for one of audiences; none: for the API
// server's own.
func (t *tokenReviewer) review(token string, audiences []string) (*UserInfo, bool, error) {
	key := t.cacheKey(token, audiences)
	if a, ok := t.answers.Get(key); ok {
		u := a.(tokenAnswer).user
		return u, u != nil, nil
	}
	v, err, _ := t.inAir.Do(key, func() (any, error) {
		if a, ok := t.answers.Get(key); ok {
			return a, nil
		}
		if !t.places.tryAcquire() {
			return nil, errReviewsBusy
		}
		defer t.places.release()
		ctx, cancel := context.WithTimeout(context.Background(), reviewTimeout)
		defer cancel()
		u, err := t.send(ctx, token, audiences)
		if err != nil {
			return nil, err
		}
		a := tokenAnswer{user: u}
		t.answers.Add(key, a, tokenReviewCacheTTL)
		return a, nil
	})
	if err != nil {
		return nil, false, err
	}
	u := v.(tokenAnswer).user
	return u, u != nil, nil
}

// send makes one TokenReview, retried while the API server says to. A
// token the API server authenticates for none of audiences is no user.
func (t *tokenReviewer) send(ctx context.Context, token string, audiences []string) (*UserInfo, error) {
	var got *authenticationv1.TokenReview
	err := withRetries(ctx, func() (err error) {
		got, err = t.client.Create(ctx, &authenticationv1.TokenReview{Spec: authenticationv1.TokenReviewSpec{
			Token: token, Audiences: audiences,
		}}, metav1.CreateOptions{})
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("TokenReview: %w", err)
	}
	s := got.Status
	if !s.Authenticated {
		return nil, nil
	}
	if len(audiences) > 0 && !slices.ContainsFunc(s.Audiences, func(a string) bool { return slices.Contains(audiences, a) }) {
		return nil, nil
	}
	u := &UserInfo{Name: s.User.Username, UID: s.User.UID, Groups: s.User.Groups}
	if len(s.User.Extra) > 0 {
		u.Extra = make(map[string][]string, len(s.User.Extra))
		for k, v := range s.User.Extra {
			u.Extra[k] = v
		}
	}
	return u, nil
}

// cacheKey is a keyed hash of the audiences and the token: a heap dump
// holds no token.
func (t *tokenReviewer) cacheKey(token string, audiences []string) string {
	h := hmac.New(sha256.New, t.hashKey)
	for _, a := range audiences {
		h.Write([]byte(a))
		h.Write([]byte{0})
	}
	h.Write([]byte{1})
	h.Write([]byte(token))
	return string(h.Sum(nil))
}

// accessReviewer asks the API server whether a user may do what it asks
// (a SubjectAccessReview), and remembers an allow for accessAllowCacheTTL,
// anything else for accessDenyCacheTTL, as k8s.io/apiserver's delegating
// authorizer does. Errors are not cached.
type accessReviewer struct {
	client  kubeclient.SubjectAccessReviewInterface
	places  *reviewCap
	answers *cache.LRUExpireCache
}

func newAccessReviewer(client kubeclient.SubjectAccessReviewInterface, maxInFlight int) *accessReviewer {
	return &accessReviewer{client: client, places: newReviewCap(maxInFlight), answers: cache.NewLRUExpireCache(maxCachedAccesses)}
}

func (z *accessReviewer) Authorize(ctx context.Context, a Attributes) (bool, string, error) {
	spec := authorizationv1.SubjectAccessReviewSpec{
		NonResourceAttributes: &authorizationv1.NonResourceAttributes{Path: a.Path, Verb: a.Verb},
	}
	if u := a.User; u != nil {
		spec.User, spec.UID, spec.Groups = u.Name, u.UID, u.Groups
		if len(u.Extra) > 0 {
			spec.Extra = make(map[string]authorizationv1.ExtraValue, len(u.Extra))
			for k, v := range u.Extra {
				spec.Extra[k] = v
			}
		}
	}
	k, err := json.Marshal(spec)
	if err != nil {
		return false, "", err
	}
	key := string(k)
	if s, ok := z.answers.Get(key); ok {
		return decide(s.(authorizationv1.SubjectAccessReviewStatus))
	}
	if !z.places.tryAcquire() {
		return false, "", errReviewsBusy
	}
	defer z.places.release()
	ctx, cancel := context.WithTimeout(ctx, reviewTimeout)
	defer cancel()
	var got *authorizationv1.SubjectAccessReview
	err = withRetries(ctx, func() (err error) {
		got, err = z.client.Create(ctx, &authorizationv1.SubjectAccessReview{Spec: spec}, metav1.CreateOptions{})
		return err
	})
	if err != nil {
		return false, "", fmt.Errorf("SubjectAccessReview: %w", err)
	}
	ttl := accessDenyCacheTTL
	if got.Status.Allowed {
		ttl = accessAllowCacheTTL
	}
	z.answers.Add(key, got.Status, ttl)
	return decide(got.Status)
}

// decide reads a SubjectAccessReview's status: allowed, or not and why.
func decide(s authorizationv1.SubjectAccessReviewStatus) (bool, string, error) {
	if s.Allowed && s.Denied {
		return false, s.Reason, errors.New("the SubjectAccessReview both allowed and denied the request")
	}
	return s.Allowed, s.Reason, nil
}

// withRetries calls send until it succeeds, fails for good, or
// reviewBackoff's steps run out. Retried are the errors k8s.io/apiserver's
// webhooks retry: a connection reset or lost, an internal error, a
// timeout, too many requests, or any answer with Retry-After.
func withRetries(ctx context.Context, send func() error) error {
	var last error
	err := wait.ExponentialBackoffWithContext(ctx, reviewBackoff(), func(context.Context) (bool, error) {
		last = send()
		switch {
		case last == nil:
			return true, nil
		case transient(last):
			return false, nil
		default:
			return false, last
		}
	})
	if last != nil {
		return last
	}
	return err
}

func transient(err error) bool {
	if utilnet.IsConnectionReset(err) || utilnet.IsHTTP2ConnectionLost(err) ||
		apierrors.IsInternalError(err) || apierrors.IsTimeout(err) || apierrors.IsTooManyRequests(err) {
		return true
	}
	_, retry := apierrors.SuggestsClientDelay(err)
	return retry
}
