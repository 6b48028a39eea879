package main

import (
	"context"
	"errors"
	"time"

	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"
	podsv1alpha1 "k8s.io/kubelet/pkg/apis/pods/v1alpha1"
	"k8s.io/utils/clock"

	"github.com/probed-dev/probed/pkg/kubeclient"
	"github.com/probed-dev/probed/pkg/podinformer"
)

// podSourceDetectWait is how long auto waits for a Pods API socket that
// exists but does not answer (a kubelet restarting as probed starts).
const podSourceDetectWait = 30 * time.Second

// podSourceGrace: /readyz reports the kubelet's Pods API unreachable only
// after this long, so a kubelet restart does not make probed unready.
const podSourceGrace = 30 * time.Second

// podSource is the informer of the node's pods, from where --pod-source
// says, and its /readyz check.
type podSource struct {
	cache.SharedIndexInformer
	source  podinformer.Source
	kubelet *podinformer.KubeletListerWatcher
	close   func()
}

func newPodSource(ctx context.Context, o *options, client kubeclient.Interface, m *podinformer.Metrics) (*podSource, error) {
	src, reason := podinformer.Choose(ctx, o.PodSource, o.KubeletPodsAPISocket, podSourceDetectWait)
	klog.InfoS("Pod source", "source", src, "reason", reason)
	m.SetSource(src)
	if src == podinformer.SourceAPIServer {
		inf, err := podinformer.New(client, o.NodeName)
		if err != nil {
			return nil, err
		}
		return &podSource{SharedIndexInformer: inf, source: src, close: func() {}}, nil
	}
	conn, err := podinformer.DialKubelet(o.KubeletPodsAPISocket)
	if err != nil {
		return nil, err
	}
	lw := podinformer.NewKubeletListerWatcher(podsv1alpha1.NewPodsClient(conn), o.KubeletPodsRelist, m, clock.RealClock{})
	inf, err := podinformer.NewFromKubelet(lw)
	if err != nil {
		_ = conn.Close()
		return nil, err
	}
	return &podSource{SharedIndexInformer: inf, source: src, kubelet: lw, close: func() { _ = conn.Close() }}, nil
}

// check is /readyz's: synced, and, from the kubelet, a watch open or a
// gap shorter than podSourceGrace.
func (p *podSource) check(context.Context) error {
	if !p.HasSynced() {
		if p.kubelet != nil {
			if err := p.kubelet.Check(0); err != nil {
				return errors.New("pod informer has not synced (" + err.Error() + ")")
			}
		}
		return errors.New("pod informer has not synced (source " + string(p.source) + ")")
	}
	if p.kubelet != nil {
		return p.kubelet.Check(podSourceGrace)
	}
	return nil
}
