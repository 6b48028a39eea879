package admission

import (
	"context"

	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	authorizationclient "k8s.io/client-go/kubernetes/typed/authorization/v1"
)

// ExecAccess answers whether a user may create pods/exec on a pod: the
// right kubectl exec needs, and so the right to change what a probe runs.
type ExecAccess interface {
	MayExec(ctx context.Context, user authenticationv1.UserInfo, namespace, pod string) (bool, error)
}

// SubjectAccessReviews is ExecAccess through the API server's authorizer,
// as the probed-probe-reach policy's CEL authorizer asks it.
type SubjectAccessReviews struct {
	Client authorizationclient.SubjectAccessReviewInterface
}

// MayExec implements ExecAccess.
func (s SubjectAccessReviews) MayExec(ctx context.Context, user authenticationv1.UserInfo, namespace, pod string) (bool, error) {
	extra := make(map[string]authorizationv1.ExtraValue, len(user.Extra))
	for k, v := range user.Extra {
		extra[k] = authorizationv1.ExtraValue(v)
	}
	review, err := s.Client.Create(ctx, &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
		User: user.Username, UID: user.UID, Groups: user.Groups, Extra: extra,
		ResourceAttributes: &authorizationv1.ResourceAttributes{
			Namespace: namespace, Verb: "create", Resource: "pods", Subresource: "exec", Name: pod,
		},
	}}, metav1.CreateOptions{})
	if err != nil {
		return false, err
	}
	return review.Status.Allowed, nil
}
