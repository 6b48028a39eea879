package controlplane

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"strings"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
)

// tokenTTL is long enough for any test; the apiserver's minimum is 10 min.
const tokenTTL = 3600

// TokenFor returns a service-account token bound to a Pod, like the one the
// kubelet projects into probed's own pod. Because the Pod has spec.nodeName,
// the token carries the node in its claims, and requests made with it carry
// the user extra authentication.kubernetes.io/node-name; probed's
// ValidatingAdmissionPolicy checks that extra.
//
// The ServiceAccount is created if missing. If podUID is empty the Pod is
// looked up by name, and created (bound to nodeName, running as
// serviceAccount, never started) if it does not exist either. If nodeName is
// not empty, TokenFor checks that the token names that node: the node comes
// from the Pod, not from the request, so a mismatch is a test bug.
func (cp *ControlPlane) TokenFor(ctx context.Context, namespace, serviceAccount, podName string, podUID types.UID, nodeName string) (string, error) {
	if err := cp.EnsureServiceAccount(ctx, namespace, serviceAccount); err != nil {
		return "", err
	}
	if podUID == "" {
		pod, err := cp.getOrCreatePod(ctx, namespace, serviceAccount, podName, nodeName)
		if err != nil {
			return "", err
		}
		podUID = pod.UID
	}
	tr, err := cp.client.CoreV1().ServiceAccounts(namespace).CreateToken(ctx, serviceAccount, &authenticationv1.TokenRequest{
		Spec: authenticationv1.TokenRequestSpec{
			ExpirationSeconds: ptr(int64(tokenTTL)),
			BoundObjectRef: &authenticationv1.BoundObjectReference{
				Kind: "Pod", APIVersion: "v1", Name: podName, UID: podUID,
			},
		},
	}, metav1.CreateOptions{})
	if err != nil {
		return "", fmt.Errorf("token for %s/%s bound to pod %s: %w", namespace, serviceAccount, podName, err)
	}
	token := tr.Status.Token
	if nodeName != "" {
		got, err := tokenNodeName(token)
		if err != nil {
			return "", err
		}
		if got != nodeName {
			return "", fmt.Errorf("token bound to pod %s/%s names node %q, want %q (check the pod's spec.nodeName)", namespace, podName, got, nodeName)
		}
	}
	return token, nil
}

// getOrCreatePod returns pod namespace/name, creating a placeholder bound to
// nodeName if it does not exist.
func (cp *ControlPlane) getOrCreatePod(ctx context.Context, namespace, serviceAccount, name, nodeName string) (*corev1.Pod, error) {
	pods := cp.client.CoreV1().Pods(namespace)
	pod, err := pods.Get(ctx, name, metav1.GetOptions{})
	if err == nil {
		return pod, nil
	}
	if !apierrors.IsNotFound(err) {
		return nil, err
	}
	pod, err = pods.Create(ctx, &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: corev1.PodSpec{
			NodeName:           nodeName,
			ServiceAccountName: serviceAccount,
			Containers:         []corev1.Container{{Name: "placeholder", Image: "probed.invalid/placeholder"}},
		},
	}, metav1.CreateOptions{})
	if err != nil {
		return nil, fmt.Errorf("create pod %s/%s for a token: %w", namespace, name, err)
	}
	return pod, nil
}

// tokenNodeName reads the node name from a service-account JWT's private
// claims. The signature is not checked: the apiserver just issued it.
func tokenNodeName(token string) (string, error) {
	parts := strings.Split(token, ".")
	if len(parts) != 3 {
		return "", fmt.Errorf("token is not a JWT")
	}
	payload, err := base64.RawURLEncoding.DecodeString(parts[1])
	if err != nil {
		return "", fmt.Errorf("decode token claims: %w", err)
	}
	var claims struct {
		Kubernetes struct {
			Node *struct {
				Name string `json:"name"`
			} `json:"node"`
		} `json:"kubernetes.io"`
	}
	if err := json.Unmarshal(payload, &claims); err != nil {
		return "", fmt.Errorf("parse token claims: %w", err)
	}
	if claims.Kubernetes.Node == nil {
		return "", nil
	}
	return claims.Kubernetes.Node.Name, nil
}

// ConfigForToken returns a rest.Config for the apiserver that authenticates
// with a bearer token (e.g. from TokenFor) and trusts the harness's CA.
func (cp *ControlPlane) ConfigForToken(token string) *rest.Config {
	return &rest.Config{
		Host:            cp.Host,
		BearerToken:     token,
		TLSClientConfig: rest.TLSClientConfig{CAData: cp.pki.caPEM},
		QPS:             200,
		Burst:           400,
	}
}

// IssueClientCert signs a client certificate with the control plane's CA, for
// user cn in groups orgs; for example a kubelet's
// ("system:node:127.0.0.1", "system:nodes"). It returns PEM certificate and key.
func (cp *ControlPlane) IssueClientCert(cn string, orgs ...string) (certPEM, keyPEM []byte, err error) {
	return cp.pki.issueClientCert(cn, orgs...)
}

func ptr[T any](v T) *T { return &v }
