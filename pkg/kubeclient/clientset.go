package kubeclient

import (
	"fmt"
	"net/http"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/gentype"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/flowcontrol"
)

// Clientset is Interface over REST, as client-go's Clientset: one HTTP
// client and one rate limiter shared by all groups.
type Clientset struct {
	c                                    codecs
	core, authn, authz, admissionregistr rest.Interface
	policy, coordination                 rest.Interface
}

var _ Interface = (*Clientset)(nil)

// NewForConfig builds a Clientset from cfg, as kubernetes.NewForConfig does.
func NewForConfig(cfg *rest.Config) (*Clientset, error) {
	cfg = rest.CopyConfig(cfg)
	if cfg.UserAgent == "" {
		cfg.UserAgent = rest.DefaultKubernetesUserAgent()
	}
	if cfg.RateLimiter == nil && cfg.QPS > 0 {
		if cfg.Burst <= 0 {
			return nil, fmt.Errorf("burst is required to be greater than 0 when RateLimiter is not set and QPS is set to greater than 0")
		}
		cfg.RateLimiter = flowcontrol.NewTokenBucketRateLimiter(cfg.QPS, cfg.Burst)
	}
	httpClient, err := rest.HTTPClientFor(cfg)
	if err != nil {
		return nil, err
	}
	cs := &Clientset{c: newCodecs()}
	for _, g := range []struct {
		into *rest.Interface
		gv   schema.GroupVersion
		path string
	}{
		{&cs.core, corev1.SchemeGroupVersion, "/api"},
		{&cs.authn, authenticationv1.SchemeGroupVersion, "/apis"},
		{&cs.authz, authorizationv1.SchemeGroupVersion, "/apis"},
		{&cs.admissionregistr, admissionregistrationv1.SchemeGroupVersion, "/apis"},
		{&cs.policy, policyv1.SchemeGroupVersion, "/apis"},
		{&cs.coordination, coordinationv1.SchemeGroupVersion, "/apis"},
	} {
		if *g.into, err = cs.restClient(cfg, httpClient, g.gv, g.path); err != nil {
			return nil, err
		}
	}
	return cs, nil
}

func (cs *Clientset) restClient(cfg *rest.Config, h *http.Client, gv schema.GroupVersion, apiPath string) (rest.Interface, error) {
	gc := *cfg
	gc.GroupVersion, gc.APIPath = &gv, apiPath
	gc.NegotiatedSerializer = rest.CodecFactoryForGeneratedClient(cs.c.scheme, cs.c.codecs).WithoutConversion()
	return rest.RESTClientForConfigAndClient(&gc, h)
}

// Scheme is the scheme the clients decode with (an event recorder's
// object references need it).
func (cs *Clientset) Scheme() *runtime.Scheme { return cs.c.scheme }

func (cs *Clientset) CoreV1() CoreV1Interface { return coreV1{cs} }

func (cs *Clientset) AuthenticationV1() AuthenticationV1Interface { return authenticationV1{cs} }

func (cs *Clientset) AuthorizationV1() AuthorizationV1Interface { return authorizationV1{cs} }

func (cs *Clientset) AdmissionregistrationV1() AdmissionregistrationV1Interface {
	return admissionregistrationV1{cs}
}

func (cs *Clientset) PolicyV1() PolicyV1Interface { return policyV1{cs} }

func (cs *Clientset) CoordinationV1() CoordinationV1Interface { return coordinationV1{cs} }

// object is what gentype's clients hold: an API object with its metadata.
type object interface {
	runtime.Object
	metav1.Object
}

// client is gentype's typed client of one resource, preferring protobuf
// as client-go's generated clients of these resources do.
func client[T object](rc rest.Interface, c codecs, resource, namespace string, newT func() T) *gentype.Client[T] {
	return gentype.NewClient(resource, rc, c.params, namespace, newT, gentype.PrefersProtobuf[T]())
}

func listClient[T object, L runtime.Object](rc rest.Interface, c codecs, resource, namespace string, newT func() T, newL func() L) *gentype.ClientWithList[T, L] {
	return gentype.NewClientWithList(resource, rc, c.params, namespace, newT, newL, gentype.PrefersProtobuf[T]())
}

type coreV1 struct{ cs *Clientset }

func (g coreV1) Pods(namespace string) PodInterface {
	return listClient(g.cs.core, g.cs.c, "pods", namespace, func() *corev1.Pod { return &corev1.Pod{} }, func() *corev1.PodList { return &corev1.PodList{} })
}

func (g coreV1) Nodes() NodeInterface {
	return listClient(g.cs.core, g.cs.c, "nodes", "", func() *corev1.Node { return &corev1.Node{} }, func() *corev1.NodeList { return &corev1.NodeList{} })
}

func (g coreV1) ConfigMaps(namespace string) ConfigMapInterface {
	return client(g.cs.core, g.cs.c, "configmaps", namespace, func() *corev1.ConfigMap { return &corev1.ConfigMap{} })
}

func (g coreV1) Events(namespace string) EventInterface {
	return client(g.cs.core, g.cs.c, "events", namespace, func() *corev1.Event { return &corev1.Event{} })
}

type authenticationV1 struct{ cs *Clientset }

func (g authenticationV1) TokenReviews() TokenReviewInterface {
	return client(g.cs.authn, g.cs.c, "tokenreviews", "", func() *authenticationv1.TokenReview { return &authenticationv1.TokenReview{} })
}

func (g authenticationV1) SelfSubjectReviews() SelfSubjectReviewInterface {
	return client(g.cs.authn, g.cs.c, "selfsubjectreviews", "", func() *authenticationv1.SelfSubjectReview { return &authenticationv1.SelfSubjectReview{} })
}

type authorizationV1 struct{ cs *Clientset }

func (g authorizationV1) SubjectAccessReviews() SubjectAccessReviewInterface {
	return client(g.cs.authz, g.cs.c, "subjectaccessreviews", "", func() *authorizationv1.SubjectAccessReview { return &authorizationv1.SubjectAccessReview{} })
}

type admissionregistrationV1 struct{ cs *Clientset }

func (g admissionregistrationV1) ValidatingAdmissionPolicies() ValidatingAdmissionPolicyInterface {
	return listClient(g.cs.admissionregistr, g.cs.c, "validatingadmissionpolicies", "",
		func() *admissionregistrationv1.ValidatingAdmissionPolicy {
			return &admissionregistrationv1.ValidatingAdmissionPolicy{}
		}, func() *admissionregistrationv1.ValidatingAdmissionPolicyList {
			return &admissionregistrationv1.ValidatingAdmissionPolicyList{}
		})
}

func (g admissionregistrationV1) ValidatingAdmissionPolicyBindings() ValidatingAdmissionPolicyBindingInterface {
	return listClient(g.cs.admissionregistr, g.cs.c, "validatingadmissionpolicybindings", "",
		func() *admissionregistrationv1.ValidatingAdmissionPolicyBinding {
			return &admissionregistrationv1.ValidatingAdmissionPolicyBinding{}
		}, func() *admissionregistrationv1.ValidatingAdmissionPolicyBindingList {
			return &admissionregistrationv1.ValidatingAdmissionPolicyBindingList{}
		})
}

type policyV1 struct{ cs *Clientset }

func (g policyV1) PodDisruptionBudgets(namespace string) PodDisruptionBudgetInterface {
	return listClient(g.cs.policy, g.cs.c, "poddisruptionbudgets", namespace,
		func() *policyv1.PodDisruptionBudget { return &policyv1.PodDisruptionBudget{} },
		func() *policyv1.PodDisruptionBudgetList { return &policyv1.PodDisruptionBudgetList{} })
}

type coordinationV1 struct{ cs *Clientset }

func (g coordinationV1) Leases(namespace string) LeaseInterface {
	return client(g.cs.coordination, g.cs.c, "leases", namespace, func() *coordinationv1.Lease { return &coordinationv1.Lease{} })
}
