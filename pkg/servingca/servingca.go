// Package servingca publishes the CA of probed's self-signed serving
// certificate, so that clients (the kubectl plugin) verify probed's TLS
// instead of trusting whatever answers on the port.
//
// Each probed pod publishes its own CA in a ConfigMap of its own namespace,
// named like the pod and owned by it: the garbage collector removes it with
// the pod, a client checks the owner's UID against the pod it found, and
// deploy/confinement.yaml lets a probed token write only the ConfigMap of
// the pod it is bound to. The CA's key never leaves the process: it signs
// the one serving certificate and is dropped, so a stolen token, or
// anything that binds the port while probed is down, cannot present a
// certificate the published CA vouches for.
package servingca

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	certutil "k8s.io/client-go/util/cert"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	"github.com/probed-dev/probed/pkg/kubeclient"
)

const (
	// CAKey holds the PEM CA certificate.
	CAKey = "ca.crt"
	// Label marks the ConfigMaps probed publishes.
	Label = "probed.io/serving-ca"
)

// Pod is the probed pod that serves the certificate.
type Pod struct {
	Namespace, Name string
	UID             types.UID
}

// ConfigMap is what pod publishes for caPEM.
func ConfigMap(pod Pod, caPEM []byte) *corev1.ConfigMap {
	return &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{
			Name:      pod.Name,
			Namespace: pod.Namespace,
			Labels:    map[string]string{Label: "true", "app.kubernetes.io/name": "probed"},
			OwnerReferences: []metav1.OwnerReference{{
				APIVersion: "v1", Kind: "Pod", Name: pod.Name, UID: pod.UID,
			}},
		},
		Data: map[string]string{CAKey: string(caPEM)},
	}
}

// CA returns the CA that cm publishes for pod, after checking that pod owns
// cm: a ConfigMap left from another pod of the same name is not trusted.
func CA(cm *corev1.ConfigMap, pod *corev1.Pod) ([]byte, error) {
	owned := false
	for _, r := range cm.OwnerReferences {
		owned = owned || (r.Kind == "Pod" && r.Name == pod.Name && r.UID == pod.UID)
	}
	if cm.Name != pod.Name || cm.Namespace != pod.Namespace || !owned {
		return nil, fmt.Errorf("ConfigMap %s/%s is not the serving CA of probed pod %s/%s (uid %s)", cm.Namespace, cm.Name, pod.Namespace, pod.Name, pod.UID)
	}
	ca := []byte(cm.Data[CAKey])
	if _, err := certutil.ParseCertsPEM(ca); err != nil {
		return nil, fmt.Errorf("ConfigMap %s/%s key %s: %w", cm.Namespace, cm.Name, CAKey, err)
	}
	return ca, nil
}

// Publisher keeps pod's ConfigMap holding CAPEM.
type Publisher struct {
	Client kubeclient.Interface
	Pod    Pod
	CAPEM  []byte
	Clock  clock.Clock
	// Resync is how often a published ConfigMap is checked again.
	Resync time.Duration
}

// Run publishes, retrying with back-off until it succeeds, then checks
// again every Resync, until ctx is done.
func (p *Publisher) Run(ctx context.Context) {
	const first, max = time.Second, time.Minute
	delay := first
	for {
		wait := p.Resync
		if err := p.Sync(ctx); err != nil {
			klog.ErrorS(err, "Publishing the serving certificate's CA failed; kubectl probed cannot verify this probed until it succeeds", "configMap", klog.KRef(p.Pod.Namespace, p.Pod.Name), "retryIn", delay)
			wait, delay = delay, min(2*delay, max)
		} else {
			delay = first
		}
		select {
		case <-ctx.Done():
			return
		case <-p.Clock.After(wait):
		}
	}
}

// Sync creates the ConfigMap, or updates it when it holds another CA.
func (p *Publisher) Sync(ctx context.Context) error {
	want := ConfigMap(p.Pod, p.CAPEM)
	cms := p.Client.CoreV1().ConfigMaps(p.Pod.Namespace)
	cur, err := cms.Get(ctx, p.Pod.Name, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		if _, err := cms.Create(ctx, want, metav1.CreateOptions{}); err != nil {
			return fmt.Errorf("creating ConfigMap %s/%s: %w", p.Pod.Namespace, p.Pod.Name, err)
		}
		klog.InfoS("Published the serving certificate's CA", "configMap", klog.KObj(want))
		return nil
	case err != nil:
		return fmt.Errorf("reading ConfigMap %s/%s: %w", p.Pod.Namespace, p.Pod.Name, err)
	}
	if ca, err := CA(cur, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: p.Pod.Namespace, Name: p.Pod.Name, UID: p.Pod.UID}}); err == nil && bytes.Equal(ca, p.CAPEM) {
		return nil
	}
	next := cur.DeepCopy()
	next.Labels, next.OwnerReferences, next.Data, next.BinaryData = want.Labels, want.OwnerReferences, want.Data, nil
	if _, err := cms.Update(ctx, next, metav1.UpdateOptions{}); err != nil {
		return fmt.Errorf("updating ConfigMap %s/%s: %w", p.Pod.Namespace, p.Pod.Name, err)
	}
	klog.InfoS("Published the serving certificate's CA", "configMap", klog.KObj(want))
	return nil
}

// ErrIncomplete: the pod's identity is not all known.
var ErrIncomplete = errors.New("the pod's name, namespace and UID are needed (POD_NAME, POD_NAMESPACE and POD_UID from the downward API)")

// Validate reports whether p names a pod.
func (p Pod) Validate() error {
	if p.Namespace == "" || p.Name == "" || p.UID == "" {
		return ErrIncomplete
	}
	return nil
}
