package nodeinfo

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/util/version"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"

	"github.com/probed-dev/probed/pkg/kubeclient"
	"github.com/probed-dev/probed/pkg/prober"
)

// nodeVersionWait bounds how long start-up waits for the Node to say which
// kubelet runs on it.
const nodeVersionWait = 15 * time.Second

// KubeletMinor returns the "<major>.<minor>" the kubelet of a version, as
// the Node reports it in status.nodeInfo.kubeletVersion, puts in its
// User-Agent, or an error. As the kubelet's build (hack/lib/version.sh)
// sets gitMinor, the minor ends in "+" when the version has a pre-release
// part, a "-" after the numbers: a vendor build ("v1.35.4-eks-1a2b3c") or a
// release candidate sends "kube-probe/1.35+". Build metadata alone
// ("v1.36.0+k3s1") adds nothing.
func KubeletMinor(kubeletVersion string) (string, error) {
	v, err := version.ParseGeneric(kubeletVersion)
	if err != nil {
		return "", err
	}
	minor := fmt.Sprintf("%d.%d", v.Major(), v.Minor())
	rest := strings.TrimLeft(strings.TrimPrefix(strings.TrimSpace(kubeletVersion), "v"), "0123456789.")
	if strings.HasPrefix(rest, "-") {
		minor += "+"
	}
	return minor, nil
}

// UserAgentVersion is the "<major>.<minor>" probes put in their
// User-Agent (kube-probe/<major>.<minor>) and lifecycle hooks in theirs
// (kube-lifecycle/...): the kubelet's own, read from the Node's
// status.nodeInfo.kubeletVersion, as the kubelet sends its compiled-in
// version. It asks for up to 15 s while the Node is not there yet;
// if the Node cannot be read or its version parsed, it logs why and
// returns fallback. FollowKubeletVersion keeps it current afterwards.
func UserAgentVersion(ctx context.Context, client kubeclient.Interface, nodeName, fallback string) string {
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

// kubeletVersionOnly is the Node informer's transform: its cache keeps the
// name and the kubelet's version, not the Node's images, addresses and
// conditions.
func kubeletVersionOnly(obj any) (any, error) {
	if n, ok := obj.(*v1.Node); ok {
		return &v1.Node{
			ObjectMeta: metav1.ObjectMeta{Name: n.Name, UID: n.UID, ResourceVersion: n.ResourceVersion},
			Status:     v1.NodeStatus{NodeInfo: v1.NodeSystemInfo{KubeletVersion: n.Status.NodeInfo.KubeletVersion}},
		}, nil
	}
	return obj, nil
}

// FollowKubeletVersion keeps ua at the version of the kubelet on nodeName
// until ctx ends: the kubelet of a node upgraded in place sends its new
// version from its restart on, and so do the next probes. It watches that
// one Node (a field selector on its name: one object, updated when the
// kubelet reports a change of its status), which needs list and watch on
// nodes. Where they are refused, it says so once and returns, and ua keeps
// the version read at start.
func FollowKubeletVersion(ctx context.Context, client kubeclient.Interface, nodeName string, ua *prober.UserAgent) {
	ctx, stop := context.WithCancel(ctx)
	defer stop()
	informer := kubeclient.NewInformer(client, client.CoreV1().Nodes(), &v1.Node{}, func(lo *metav1.ListOptions) {
		lo.FieldSelector = fields.OneTermEqualSelector(metav1.ObjectNameField, nodeName).String()
	})
	if err := informer.SetTransform(kubeletVersionOnly); err != nil {
		klog.ErrorS(err, "Following the node's kubelet version")
		return
	}
	var once sync.Once
	if err := informer.SetWatchErrorHandlerWithContext(func(ctx context.Context, r *cache.Reflector, err error) {
		if apierrors.IsForbidden(err) || apierrors.IsUnauthorized(err) {
			once.Do(func() {
				klog.InfoS("No permission to watch the Node; the probes' User-Agent keeps the kubelet version read at start", "node", nodeName, "version", ua.Version(), "err", err)
				stop()
			})
			return
		}
		cache.DefaultWatchErrorHandler(ctx, r, err)
	}); err != nil {
		klog.ErrorS(err, "Following the node's kubelet version")
		return
	}
	update := func(obj any) {
		node, ok := obj.(*v1.Node)
		if !ok || node.Name != nodeName {
			return
		}
		minor, err := KubeletMinor(node.Status.NodeInfo.KubeletVersion)
		if err != nil {
			return // a Node being re-registered; the next update has it
		}
		if ua.Set(minor) {
			klog.InfoS("The node's kubelet version changed; probes send its User-Agent from now on", "node", nodeName, "version", minor)
		}
	}
	if _, err := informer.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    update,
		UpdateFunc: func(_, obj any) { update(obj) },
	}); err != nil {
		klog.ErrorS(err, "Following the node's kubelet version")
		return
	}
	informer.RunWithContext(ctx)
}
