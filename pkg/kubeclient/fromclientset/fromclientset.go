// Package fromclientset serves kubeclient.Interface from a client-go
// clientset: tests pass client-go's fake clientset where probed takes a
// kubeclient.Interface. probed itself never imports it (it would link
// every API group back in).
package fromclientset

import (
	"k8s.io/client-go/kubernetes"

	"github.com/probed-dev/probed/pkg/kubeclient"
)

// New is cs as a kubeclient.Interface.
func New(cs kubernetes.Interface) kubeclient.Interface { return clientset{cs} }

type clientset struct{ cs kubernetes.Interface }

func (c clientset) CoreV1() kubeclient.CoreV1Interface { return coreV1{c.cs} }

func (c clientset) AuthenticationV1() kubeclient.AuthenticationV1Interface {
	return authenticationV1{c.cs}
}

func (c clientset) AuthorizationV1() kubeclient.AuthorizationV1Interface {
	return authorizationV1{c.cs}
}

func (c clientset) AdmissionregistrationV1() kubeclient.AdmissionregistrationV1Interface {
	return admissionregistrationV1{c.cs}
}

func (c clientset) PolicyV1() kubeclient.PolicyV1Interface { return policyV1{c.cs} }

func (c clientset) CoordinationV1() kubeclient.CoordinationV1Interface { return coordinationV1{c.cs} }

type policyV1 struct{ cs kubernetes.Interface }

func (g policyV1) PodDisruptionBudgets(ns string) kubeclient.PodDisruptionBudgetInterface {
	return g.cs.PolicyV1().PodDisruptionBudgets(ns)
}

type coordinationV1 struct{ cs kubernetes.Interface }

func (g coordinationV1) Leases(ns string) kubeclient.LeaseInterface {
	return g.cs.CoordinationV1().Leases(ns)
}

type coreV1 struct{ cs kubernetes.Interface }

func (g coreV1) Pods(ns string) kubeclient.PodInterface { return g.cs.CoreV1().Pods(ns) }

func (g coreV1) Nodes() kubeclient.NodeInterface { return g.cs.CoreV1().Nodes() }

func (g coreV1) ConfigMaps(ns string) kubeclient.ConfigMapInterface {
	return g.cs.CoreV1().ConfigMaps(ns)
}

func (g coreV1) Events(ns string) kubeclient.EventInterface { return g.cs.CoreV1().Events(ns) }

type authenticationV1 struct{ cs kubernetes.Interface }

func (g authenticationV1) TokenReviews() kubeclient.TokenReviewInterface {
	return g.cs.AuthenticationV1().TokenReviews()
}

func (g authenticationV1) SelfSubjectReviews() kubeclient.SelfSubjectReviewInterface {
	return g.cs.AuthenticationV1().SelfSubjectReviews()
}

type authorizationV1 struct{ cs kubernetes.Interface }

func (g authorizationV1) SubjectAccessReviews() kubeclient.SubjectAccessReviewInterface {
	return g.cs.AuthorizationV1().SubjectAccessReviews()
}

type admissionregistrationV1 struct{ cs kubernetes.Interface }

func (g admissionregistrationV1) ValidatingAdmissionPolicies() kubeclient.ValidatingAdmissionPolicyInterface {
	return g.cs.AdmissionregistrationV1().ValidatingAdmissionPolicies()
}

func (g admissionregistrationV1) ValidatingAdmissionPolicyBindings() kubeclient.ValidatingAdmissionPolicyBindingInterface {
	return g.cs.AdmissionregistrationV1().ValidatingAdmissionPolicyBindings()
}

// IsWatchListSemanticsUnSupported passes on what the clientset says
// (client-go's fake does not support watch-list), for informers.
func (c clientset) IsWatchListSemanticsUnSupported() bool {
	u, ok := c.cs.(interface{ IsWatchListSemanticsUnSupported() bool })
	return ok && u.IsWatchListSemanticsUnSupported()
}
