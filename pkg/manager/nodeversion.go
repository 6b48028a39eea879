package manager

import (
	"context"
	"fmt"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/version"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/klog/v2"
)

// nodeVersionWait bounds how long start-up waits for the Node to say which
// kubelet runs on it.
const nodeVersionWait = 15 * time.Second

// KubeletMinor returns "<major>.<minor>" of a kubelet version as the Node
// reports it in status.nodeInfo.kubeletVersion ("v1.37.2",
// "v1.35.4-eks-1a2b3c"), or an error.
func KubeletMinor(kubeletVersion string) (string, error) {
	v, err := version.ParseGeneric(kubeletVersion)
	if err != nil {
		return "", err
	}
	return fmt.Sprintf("%d.%d", v.Major(), v.Minor()), nil
}

// NodeUserAgentVersion is the "<major>.<minor>" probes put in their
// User-Agent (kube-probe/<major>.<minor>) and lifecycle hooks in theirs
// (kube-lifecycle/...): the kubelet's own, read from the Node's
// status.nodeInfo.kubeletVersion, as the kubelet sends its compiled-in
// version. It asks for up to 15 s while the Node is not there yet;
// if the Node cannot be read or its version parsed, it logs why and
// returns fallback.
func NodeUserAgentVersion(ctx context.Context, client kubernetes.Interface, nodeName, fallback string) string {
	var minor string
	var last error
	if err := wait.PollUntilContextTimeout(ctx, time.Second, nodeVersionWait, true, func(ctx context.Context) (bool, error) {
		node, err := client.CoreV1().Nodes().Get(ctx, nodeName, metav1.GetOptions{})
		switch {
		case apierrors.IsForbidden(err) || apierrors.IsUnauthorized(err):
			return false, err // asking again will not help
		case err != nil:
			last = err
			return false, nil
		}
		// A Node without a version will not get one soon: its kubelet has
		// registered it (a version is part of registering), or nothing will.
		minor, last = KubeletMinor(node.Status.NodeInfo.KubeletVersion)
		return true, nil
	}); err != nil && last == nil {
		last = err
	}
	if minor == "" {
		klog.InfoS("Could not read the node's kubelet version; probes send the default User-Agent version (--probe-user-agent-version sets it)",
			"node", nodeName, "err", last, "version", fallback)
		return fallback
	}
	klog.V(2).InfoS("Probes' User-Agent follows the node's kubelet", "node", nodeName, "version", minor)
	return minor
}
