package admission

import (
	"slices"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/probed-dev/probed/pkg/probespec"
)

// NameLabel is the label probed's own pods carry (the DaemonSet's and the
// webhook's): app.kubernetes.io/name.
const NameLabel = probespec.OwnNameLabel

// Scope is what the webhook must never adopt, whatever the webhook
// configurations send it. The configurations' selectors choose the pods
// (a namespace labelled probed.io/inject=enabled, or a pod labelled so);
// Scope is the handler's own second check of what it can see in the
// request alone, so that a hand-edited configuration cannot make probed
// probe itself, or touch kube-system.
type Scope struct {
	// ExcludedNamespaces are never adopted: kube-system and probed's own.
	ExcludedNamespaces []string
	// OwnNames are the NameLabel values of probed's own pods.
	OwnNames []string
}

// DefaultOwnNames returns the NameLabel values of deploy/'s DaemonSet and webhook.
func DefaultOwnNames() []string { return probespec.OwnNames() }

// skip returns why a pod in namespace ns with meta must not be adopted, or "".
func (s Scope) skip(ns string, meta *metav1.ObjectMeta) string {
	switch {
	case slices.Contains(s.ExcludedNamespaces, ns):
		return "excluded namespace"
	case slices.Contains(s.OwnNames, meta.Labels[NameLabel]):
		return "probed's own pod"
	case probespec.OptedOut(meta):
		return "opted out"
	case meta.Annotations[v1.MirrorPodAnnotationKey] != "":
		// The kubelet runs a static pod's probes from its manifest, not
		// from the mirror pod: adopting it would run them twice.
		return "a mirror pod"
	}
	return ""
}
