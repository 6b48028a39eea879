package admission

import (
	"encoding/json"
	"testing"

	jsonpatchv4 "gopkg.in/evanphx/json-patch.v4"
	admissionv1 "k8s.io/api/admission/v1"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"
)

var podGVK = metav1.GroupVersionKind{Version: "v1", Kind: "Pod"}

func request(op admissionv1.Operation, gvk metav1.GroupVersionKind, ns string, raw, oldRaw []byte) admission.Request {
	return admission.Request{AdmissionRequest: admissionv1.AdmissionRequest{
		UID:       "1",
		Kind:      gvk,
		Namespace: ns,
		Operation: op,
		Object:    runtime.RawExtension{Raw: raw},
		OldObject: runtime.RawExtension{Raw: oldRaw},
	}}
}

func mustJSON(t testing.TB, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// applyPatch applies the response's patch to raw as the API server does
// (its mutating dispatcher uses evanphx/json-patch v4).
func applyPatch(t testing.TB, raw []byte, resp admission.Response) []byte {
	t.Helper()
	if len(resp.Patches) == 0 {
		return raw
	}
	p, err := jsonpatchv4.DecodePatch(mustJSON(t, resp.Patches))
	if err != nil {
		t.Fatalf("decoding the patch %s: %v", mustJSON(t, resp.Patches), err)
	}
	out, err := p.Apply(raw)
	if err != nil {
		t.Fatalf("applying the patch %s to %s: %v", mustJSON(t, resp.Patches), raw, err)
	}
	return out
}

func httpProbe(port int) *v1.Probe {
	return &v1.Probe{ProbeHandler: v1.ProbeHandler{HTTPGet: &v1.HTTPGetAction{Path: "/", Port: intstr.FromInt32(int32(port))}}}
}

func execProbe(cmd ...string) *v1.Probe {
	return &v1.Probe{ProbeHandler: v1.ProbeHandler{Exec: &v1.ExecAction{Command: cmd}}}
}

// webPod has a container with all three probes and a sidecar with a
// liveness probe.
func webPod() *v1.Pod {
	always := v1.ContainerRestartPolicyAlways
	return &v1.Pod{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"},
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "apps", Labels: map[string]string{"app": "web"}},
		Spec: v1.PodSpec{
			InitContainers: []v1.Container{
				{Name: "init", Image: "busybox", LivenessProbe: execProbe("true")}, // not a sidecar: untouched
				{Name: "proxy", Image: "proxy", RestartPolicy: &always, LivenessProbe: execProbe("true")},
			},
			Containers: []v1.Container{{
				Name: "app", Image: "app",
				Ports:          []v1.ContainerPort{{Name: "http", ContainerPort: 8080}},
				LivenessProbe:  execProbe("cat", "/tmp/healthy"),
				ReadinessProbe: httpProbe(8080),
				StartupProbe:   &v1.Probe{ProbeHandler: v1.ProbeHandler{TCPSocket: &v1.TCPSocketAction{Port: intstr.FromString("http")}}, FailureThreshold: 30},
			}},
		},
	}
}
