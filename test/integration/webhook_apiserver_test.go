//go:build integration

package integration

import (
	"context"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/probed-dev/probed/pkg/probespec"
)

// Mutating admission runs before Pod Security validates and before the API
// server drops alpha fields whose gates are off. On the real API server,
// with the real webhook: a spec probe with a host in a namespace enforcing
// Pod Security baseline is refused by Pod Security (adoption did not hide
// it in the annotation); an annotation probe with a host there is refused
// by the webhook; and a gRPC probe with mode TLS (its gate off, the 1.37
// default) keeps its probe in the spec, where the API server drops mode,
// as it does without probed.
func TestWebhookLeavesWhatTheAPIServerJudges(t *testing.T) {
	port := freePort(t)
	installWebhook(t, port)
	w := startWebhook(t, port)
	w.waitReady()
	ctx := context.Background()
	ns := labelledNamespace(t, "wh-pod-security", true)
	nsObj, err := client.CoreV1().Namespaces().Get(ctx, ns, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	nsObj.Labels["pod-security.kubernetes.io/enforce"] = "baseline"
	if _, err := client.CoreV1().Namespaces().Update(ctx, nsObj, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}

	hosted := probedPod("spec-host")
	hosted.Spec.Containers[0].ReadinessProbe.HTTPGet.Host = "10.0.0.1"
	_, err = client.CoreV1().Pods(ns).Create(ctx, hosted, metav1.CreateOptions{})
	if err == nil || !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), `violates PodSecurity "baseline:latest": probe or lifecycle host`) {
		t.Errorf("a spec probe host in a baseline namespace: %v; want Pod Security's refusal", err)
	}

	annotated := probedPod("annotation-host")
	annotated.Spec.Containers[0].ReadinessProbe = nil
	annotated.Annotations = map[string]string{probespec.ProbesAnnotation: `{"app":{"readinessProbe":{"tcpSocket":{"host":"10.0.0.1","port":8080}}}}`}
	_, err = client.CoreV1().Pods(ns).Create(ctx, annotated, metav1.CreateOptions{})
	if err == nil || !strings.Contains(err.Error(), `container "app" readinessProbe: tcpSocket.host: Forbidden: the namespace enforces Pod Security baseline or restricted`) {
		t.Errorf("an annotation probe host in a baseline namespace: %v; want the webhook's refusal", err)
	}

	tls := v1.GRPCProbeModeTLS
	grpc := probedPod("grpc-tls")
	grpc.Spec.Containers[0].LivenessProbe = &v1.Probe{ProbeHandler: v1.ProbeHandler{GRPC: &v1.GRPCAction{Port: 9090, Mode: &tls}}}
	created, err := client.CoreV1().Pods(ns).Create(ctx, grpc, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = client.CoreV1().Pods(ns).Delete(ctx, created.Name, metav1.DeleteOptions{}) })
	if p := created.Spec.Containers[0].LivenessProbe; p == nil || p.GRPC == nil {
		t.Errorf("the gRPC probe left the spec: %s", mustJSON(created))
	}
	if ann := created.Annotations[probespec.ProbesAnnotation]; strings.Contains(ann, "grpc") || !strings.Contains(ann, "readinessProbe") {
		t.Errorf("annotation %s: want the other probes adopted, not the gRPC one", ann)
	}
}
