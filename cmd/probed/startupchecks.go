package main

import (
	"context"
	"fmt"
	"slices"
	"strings"

	authnv1 "k8s.io/api/authentication/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/klog/v2"

	"github.com/probed-dev/probed/pkg/kubeclient"
)

// Checks run once at start-up, before probed watches a pod: a failure
// stops it with an error that says what to fix.

// nodeNameExtra is the user extra a bound service-account token carries
// when it is bound to a pod: the name of the pod's node. probed's
// node-confinement admission policy allows a status write or an event only
// for that node.
const nodeNameExtra = "authentication.kubernetes.io/node-name"

// checkNodeClaim asks the API server who probed is (a SelfSubjectReview)
// and fails when that identity cannot write under the node-confinement
// policy: a service account whose token carries no node-name claim (every
// write would be denied), or one bound to another node than nodeName. Any
// other identity (a user's kubeconfig in development) is not confined and
// passes. An error reaching the API server is logged and passed: the
// informer waits for the API server anyway, and a missing claim shows then
// as denied writes.
func checkNodeClaim(ctx context.Context, client kubeclient.Interface, nodeName string) error {
	review, err := client.AuthenticationV1().SelfSubjectReviews().Create(ctx, &authnv1.SelfSubjectReview{}, metav1.CreateOptions{})
	if err != nil {
		klog.ErrorS(err, "Could not check probed's identity with a SelfSubjectReview; going on")
		return nil
	}
	return nodeClaimError(review.Status.UserInfo, nodeName)
}

// nodeClaimError is checkNodeClaim's judgement of an identity.
func nodeClaimError(ui authnv1.UserInfo, nodeName string) error {
	if !strings.HasPrefix(ui.Username, "system:serviceaccount:") {
		klog.InfoS("probed runs as a user, not a service account; node confinement does not apply", "user", ui.Username)
		return nil
	}
	nodes := ui.Extra[nodeNameExtra]
	switch {
	case len(nodes) == 0:
		return fmt.Errorf("probed's token (%s) carries no %s claim, so the node-confinement policy will deny every status write and event: "+
			"use a projected service-account token of probed's pod (the DaemonSet's default), on Kubernetes 1.30 or later (ServiceAccountTokenPodNodeInfo)",
			ui.Username, nodeNameExtra)
	case !slices.Contains(nodes, nodeName):
		return fmt.Errorf("probed's token (%s) is bound to node %q, but --node-name is %q: every status write and event would be denied",
			ui.Username, strings.Join(nodes, ","), nodeName)
	}
	klog.V(2).InfoS("probed's identity carries its node", "user", ui.Username, "node", nodeName)
	return nil
}
