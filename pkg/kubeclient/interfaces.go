package kubeclient

import (
	"context"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
)

// Interface is the part of the Kubernetes API probed calls. Each method
// set is a subset of client-go's typed client of the same name.
type Interface interface {
	CoreV1() CoreV1Interface
	AuthenticationV1() AuthenticationV1Interface
	AuthorizationV1() AuthorizationV1Interface
	AdmissionregistrationV1() AdmissionregistrationV1Interface
	PolicyV1() PolicyV1Interface
	CoordinationV1() CoordinationV1Interface
}

// CoreV1Interface is the core/v1 group's resources probed uses.
type CoreV1Interface interface {
	Pods(namespace string) PodInterface
	Nodes() NodeInterface
	ConfigMaps(namespace string) ConfigMapInterface
	Events(namespace string) EventInterface
}

// PodInterface reads, watches and patches pods (status included, by
// subresource).
type PodInterface interface {
	Get(ctx context.Context, name string, opts metav1.GetOptions) (*corev1.Pod, error)
	List(ctx context.Context, opts metav1.ListOptions) (*corev1.PodList, error)
	Watch(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error)
	Patch(ctx context.Context, name string, pt types.PatchType, data []byte, opts metav1.PatchOptions, subresources ...string) (*corev1.Pod, error)
}

// NodeInterface reads and watches nodes.
type NodeInterface interface {
	Get(ctx context.Context, name string, opts metav1.GetOptions) (*corev1.Node, error)
	List(ctx context.Context, opts metav1.ListOptions) (*corev1.NodeList, error)
	Watch(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error)
}

// ConfigMapInterface reads and writes config maps.
type ConfigMapInterface interface {
	Get(ctx context.Context, name string, opts metav1.GetOptions) (*corev1.ConfigMap, error)
	Create(ctx context.Context, cm *corev1.ConfigMap, opts metav1.CreateOptions) (*corev1.ConfigMap, error)
	Update(ctx context.Context, cm *corev1.ConfigMap, opts metav1.UpdateOptions) (*corev1.ConfigMap, error)
}

// EventInterface writes events.
type EventInterface interface {
	Create(ctx context.Context, e *corev1.Event, opts metav1.CreateOptions) (*corev1.Event, error)
	Update(ctx context.Context, e *corev1.Event, opts metav1.UpdateOptions) (*corev1.Event, error)
	Patch(ctx context.Context, name string, pt types.PatchType, data []byte, opts metav1.PatchOptions, subresources ...string) (*corev1.Event, error)
}

// AuthenticationV1Interface creates token and self-subject reviews.
type AuthenticationV1Interface interface {
	TokenReviews() TokenReviewInterface
	SelfSubjectReviews() SelfSubjectReviewInterface
}

// TokenReviewInterface creates TokenReviews.
type TokenReviewInterface interface {
	Create(ctx context.Context, r *authenticationv1.TokenReview, opts metav1.CreateOptions) (*authenticationv1.TokenReview, error)
}

// SelfSubjectReviewInterface creates SelfSubjectReviews.
type SelfSubjectReviewInterface interface {
	Create(ctx context.Context, r *authenticationv1.SelfSubjectReview, opts metav1.CreateOptions) (*authenticationv1.SelfSubjectReview, error)
}

// AuthorizationV1Interface creates subject access reviews.
type AuthorizationV1Interface interface {
	SubjectAccessReviews() SubjectAccessReviewInterface
}

// SubjectAccessReviewInterface creates SubjectAccessReviews.
type SubjectAccessReviewInterface interface {
	Create(ctx context.Context, r *authorizationv1.SubjectAccessReview, opts metav1.CreateOptions) (*authorizationv1.SubjectAccessReview, error)
}

// AdmissionregistrationV1Interface reads validating admission policies
// and their bindings.
type AdmissionregistrationV1Interface interface {
	ValidatingAdmissionPolicies() ValidatingAdmissionPolicyInterface
	ValidatingAdmissionPolicyBindings() ValidatingAdmissionPolicyBindingInterface
}

// ValidatingAdmissionPolicyInterface lists and watches policies.
type ValidatingAdmissionPolicyInterface interface {
	List(ctx context.Context, opts metav1.ListOptions) (*admissionregistrationv1.ValidatingAdmissionPolicyList, error)
	Watch(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error)
}

// ValidatingAdmissionPolicyBindingInterface lists and watches bindings.
type ValidatingAdmissionPolicyBindingInterface interface {
	List(ctx context.Context, opts metav1.ListOptions) (*admissionregistrationv1.ValidatingAdmissionPolicyBindingList, error)
	Watch(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error)
}

// PolicyV1Interface reads PodDisruptionBudgets.
type PolicyV1Interface interface {
	PodDisruptionBudgets(namespace string) PodDisruptionBudgetInterface
}

// PodDisruptionBudgetInterface lists and watches PodDisruptionBudgets.
type PodDisruptionBudgetInterface interface {
	Get(ctx context.Context, name string, opts metav1.GetOptions) (*policyv1.PodDisruptionBudget, error)
	List(ctx context.Context, opts metav1.ListOptions) (*policyv1.PodDisruptionBudgetList, error)
	Watch(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error)
}

// CoordinationV1Interface reads and writes Leases.
type CoordinationV1Interface interface {
	Leases(namespace string) LeaseInterface
}

// LeaseInterface reads and writes Leases.
type LeaseInterface interface {
	Get(ctx context.Context, name string, opts metav1.GetOptions) (*coordinationv1.Lease, error)
	Create(ctx context.Context, l *coordinationv1.Lease, opts metav1.CreateOptions) (*coordinationv1.Lease, error)
	Update(ctx context.Context, l *coordinationv1.Lease, opts metav1.UpdateOptions) (*coordinationv1.Lease, error)
}
