package controlplane

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// rootCAConfigMap is what kube-controller-manager's root-ca-cert-publisher
// puts in every namespace; projected service-account volumes read it.
const rootCAConfigMap = "kube-root-ca.crt"

// CreateNode creates a Node named name and marks it Ready with InternalIP
// 127.0.0.1, as a kubelet would. No kubelet runs: the node is only an object
// for pods to be bound to (spec.nodeName) and for tokens to name. If the node
// already exists it is returned unchanged, so tests sharing a control plane
// can call this freely.
func (cp *ControlPlane) CreateNode(ctx context.Context, name string) (*corev1.Node, error) {
	nodes := cp.client.CoreV1().Nodes()
	node, err := nodes.Create(ctx, &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{
			Name:   name,
			Labels: map[string]string{corev1.LabelHostname: name},
		},
	}, metav1.CreateOptions{})
	if apierrors.IsAlreadyExists(err) {
		return nodes.Get(ctx, name, metav1.GetOptions{})
	}
	if err != nil {
		return nil, fmt.Errorf("create node %s: %w", name, err)
	}
	// Status is ignored on create; it is a separate write, as for a kubelet.
	now := metav1.Now()
	node.Status.Conditions = []corev1.NodeCondition{{
		Type:               corev1.NodeReady,
		Status:             corev1.ConditionTrue,
		Reason:             "KubeletReady",
		Message:            "probed test harness",
		LastHeartbeatTime:  now,
		LastTransitionTime: now,
	}}
	node.Status.Addresses = []corev1.NodeAddress{
		{Type: corev1.NodeInternalIP, Address: "127.0.0.1"},
		{Type: corev1.NodeHostName, Address: name},
	}
	node, err = nodes.UpdateStatus(ctx, node, metav1.UpdateOptions{})
	if err != nil {
		return nil, fmt.Errorf("set status of node %s: %w", name, err)
	}
	return node, nil
}

// EnsureNamespace creates namespace name if it is missing, together with what
// kube-controller-manager would add to it: the "default" ServiceAccount
// (without it the ServiceAccount admission plugin rejects every pod) and the
// kube-root-ca.crt ConfigMap. Safe to call repeatedly.
func (cp *ControlPlane) EnsureNamespace(ctx context.Context, name string) error {
	_, err := cp.client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{
		ObjectMeta: metav1.ObjectMeta{Name: name},
	}, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("create namespace %s: %w", name, err)
	}
	if err := cp.EnsureServiceAccount(ctx, name, "default"); err != nil {
		return err
	}
	_, err = cp.client.CoreV1().ConfigMaps(name).Create(ctx, &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: rootCAConfigMap},
		Data:       map[string]string{"ca.crt": string(cp.pki.caPEM)},
	}, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("create configmap %s/%s: %w", name, rootCAConfigMap, err)
	}
	return nil
}

// EnsureServiceAccount creates a ServiceAccount if it is missing.
func (cp *ControlPlane) EnsureServiceAccount(ctx context.Context, namespace, name string) error {
	_, err := cp.client.CoreV1().ServiceAccounts(namespace).Create(ctx, &corev1.ServiceAccount{
		ObjectMeta: metav1.ObjectMeta{Name: name},
	}, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("create serviceaccount %s/%s: %w", namespace, name, err)
	}
	return nil
}
