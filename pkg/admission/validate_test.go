package admission

import (
	"net/http"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	admissionv1 "k8s.io/api/admission/v1"
	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/probed-dev/probed/pkg/probespec"
)

var (
	deploymentGVK = metav1.GroupVersionKind{Group: "apps", Version: "v1", Kind: "Deployment"}
	cronJobGVK    = metav1.GroupVersionKind{Group: "batch", Version: "v1", Kind: "CronJob"}
)

func newValidator() *Validator {
	return &Validator{ExcludedNamespaces: []string{"kube-system"}, Metrics: NewMetrics(prometheus.NewRegistry())}
}

// annotated is a pod with only an annotation, no spec probes.
func annotated(annotation string) *v1.Pod {
	pod := webPod()
	for i := range pod.Spec.Containers {
		pod.Spec.Containers[i].LivenessProbe, pod.Spec.Containers[i].ReadinessProbe, pod.Spec.Containers[i].StartupProbe = nil, nil, nil
	}
	pod.Annotations = map[string]string{probespec.ProbesAnnotation: annotation}
	return pod
}

// daemonSays is what the daemon's InvalidProbe events would say of pod.
func daemonSays(t *testing.T, pod *v1.Pod) []string {
	t.Helper()
	_, problems := probespec.DeclaredProbes(pod, probespec.ProbeSourceAnnotation)
	var out []string
	for _, p := range problems {
		out = append(out, p.String())
	}
	if len(out) == 0 {
		t.Fatal("the daemon finds nothing wrong: a bad test case")
	}
	return out
}

func TestValidatorRefusesWithTheDaemonsWords(t *testing.T) {
	for name, annotation := range map[string]string{
		"malformed":         `{"app": [`,
		"unknown field":     `{"app": {"readinessProbe": {"perodSeconds": 2}}}`,
		"two handlers":      `{"app": {"livenessProbe": {"exec": {"command": ["true"]}, "tcpSocket": {"port": 80}}}}`,
		"bad named port":    `{"app": {"readinessProbe": {"httpGet": {"port": "metrics"}}}}`,
		"liveness success":  `{"app": {"livenessProbe": {"exec": {"command": ["true"]}, "successThreshold": 2}}}`,
		"unknown container": `{"db": {"livenessProbe": {"exec": {"command": ["true"]}}}}`,
		"several":           `{"app": {"readinessProbe": {"httpGet": {"port": 0}}, "startupProbe": {"tcpSocket": {"port": 70000}, "successThreshold": 3}}}`,
	} {
		t.Run(name, func(t *testing.T) {
			pod := annotated(annotation)
			want := strings.Join(daemonSays(t, pod), "\n")
			resp := newValidator().Handle(t.Context(), request(admissionv1.Create, podGVK, "apps", mustJSON(t, pod), nil))
			if resp.Allowed || resp.Result.Code != http.StatusUnprocessableEntity {
				t.Fatalf("response %+v, want a 422 refusal", resp.Result)
			}
			if resp.Result.Message != want {
				t.Errorf("message\n%s\nwant the daemon's\n%s", resp.Result.Message, want)
			}
		})
	}
}

func TestValidatorAllows(t *testing.T) {
	valid := annotated(`{"app": {"readinessProbe": {"httpGet": {"port": "http"}}}, "proxy": {"livenessProbe": {"tcpSocket": {"port": 1}}}}`)
	invalid := annotated(`{"app": {"readinessProbe": {"httpGet": {"port": "metrics"}}}}`)
	relabelled := invalid.DeepCopy()
	relabelled.Labels["x"] = "y"
	plain := webPod()
	for _, tc := range []struct {
		name     string
		op       admissionv1.Operation
		ns       string
		pod, old *v1.Pod
	}{
		{"valid", admissionv1.Create, "apps", valid, nil},
		{"no annotation", admissionv1.Create, "apps", plain, nil},
		{"excluded namespace", admissionv1.Create, "kube-system", invalid, nil},
		// A pod admitted before the webhook: updates that leave the
		// annotation alone go through (a Job's finalizer removal, say).
		{"update, annotation unchanged", admissionv1.Update, "apps", relabelled, invalid},
		{"update, made valid", admissionv1.Update, "apps", valid, invalid},
		{"delete", admissionv1.Delete, "apps", invalid, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var old []byte
			if tc.old != nil {
				old = mustJSON(t, tc.old)
			}
			resp := newValidator().Handle(t.Context(), request(tc.op, podGVK, tc.ns, mustJSON(t, tc.pod), old))
			if !resp.Allowed {
				t.Errorf("refused: %v", resp.Result)
			}
		})
	}
}

func TestValidatorUpdateChangingAnnotation(t *testing.T) {
	old := annotated(`{"app": {"readinessProbe": {"httpGet": {"port": "http"}}}}`)
	pod := annotated(`{"app": {"readinessProbe": {"httpGet": {"port": "metrics"}}}}`)
	resp := newValidator().Handle(t.Context(), request(admissionv1.Update, podGVK, "apps", mustJSON(t, pod), mustJSON(t, old)))
	if resp.Allowed || resp.Result.Message != daemonSays(t, pod)[0] {
		t.Errorf("response %+v, want refused with %q", resp.Result, daemonSays(t, pod)[0])
	}
}

func deployment(pod *v1.Pod) *appsv1.Deployment {
	return &appsv1.Deployment{
		TypeMeta:   metav1.TypeMeta{APIVersion: "apps/v1", Kind: "Deployment"},
		ObjectMeta: metav1.ObjectMeta{Name: "web"},
		Spec: appsv1.DeploymentSpec{Template: v1.PodTemplateSpec{
			ObjectMeta: metav1.ObjectMeta{Labels: pod.Labels, Annotations: pod.Annotations}, Spec: pod.Spec,
		}},
	}
}

// Workloads' templates are judged at `kubectl apply`, with where.
func TestValidatorTemplates(t *testing.T) {
	bad := annotated(`{"app": {"readinessProbe": {"httpGet": {"port": "metrics"}}}}`)
	want := daemonSays(t, bad)[0]

	resp := newValidator().Handle(t.Context(), request(admissionv1.Create, deploymentGVK, "apps", mustJSON(t, deployment(bad)), nil))
	if resp.Allowed || resp.Result.Message != "spec.template: "+want {
		t.Errorf("Deployment: %+v, want refused with %q", resp.Result, "spec.template: "+want)
	}

	cj := &batchv1.CronJob{Spec: batchv1.CronJobSpec{JobTemplate: batchv1.JobTemplateSpec{Spec: batchv1.JobSpec{
		Template: deployment(bad).Spec.Template,
	}}}}
	resp = newValidator().Handle(t.Context(), request(admissionv1.Create, cronJobGVK, "apps", mustJSON(t, cj), nil))
	if resp.Allowed || resp.Result.Message != "spec.jobTemplate.spec.template: "+want {
		t.Errorf("CronJob: %+v", resp.Result)
	}

	// A key for a container another webhook injects into the pods (a
	// service mesh's proxy) is not the template's mistake.
	injected := annotated(`{"istio-proxy": {"readinessProbe": {"httpGet": {"port": 15021}}}}`)
	resp = newValidator().Handle(t.Context(), request(admissionv1.Create, deploymentGVK, "apps", mustJSON(t, deployment(injected)), nil))
	if !resp.Allowed {
		t.Errorf("a template naming an injected container was refused: %v", resp.Result)
	}

	// Scaling or relabelling a Deployment whose template did not change.
	scaled := deployment(bad)
	scaled.Spec.Replicas = new(int32)
	resp = newValidator().Handle(t.Context(), request(admissionv1.Update, deploymentGVK, "apps", mustJSON(t, scaled), mustJSON(t, deployment(bad))))
	if !resp.Allowed {
		t.Errorf("an update leaving the template alone was refused: %v", resp.Result)
	}
	// A template change (kubectl rollout restart) is judged.
	restarted := deployment(bad)
	restarted.Spec.Template.Annotations = map[string]string{"kubectl.kubernetes.io/restartedAt": "now", probespec.ProbesAnnotation: bad.Annotations[probespec.ProbesAnnotation]}
	resp = newValidator().Handle(t.Context(), request(admissionv1.Update, deploymentGVK, "apps", mustJSON(t, restarted), mustJSON(t, deployment(bad))))
	if resp.Allowed {
		t.Error("a changed template with an invalid annotation was allowed")
	}
}

func TestValidatorOtherKinds(t *testing.T) {
	gvk := metav1.GroupVersionKind{Version: "v1", Kind: "ConfigMap"}
	resp := newValidator().Handle(t.Context(), request(admissionv1.Create, gvk, "apps", []byte(`{"data":{}}`), nil))
	if !resp.Allowed {
		t.Errorf("refused a ConfigMap: %v", resp.Result)
	}
}

// Issue 31, 1b: a Job (restartPolicy OnFailure) whose template declares a
// liveness probe in the annotation is refused at `kubectl apply`, with the
// daemon's reason and fix, as the daemon would refuse to run the probe.
func TestValidatorRefusesAnOnFailureJobsAnnotatedLiveness(t *testing.T) {
	pod := annotated(`{"app": {"livenessProbe": {"exec": {"command": ["true"]}}, "readinessProbe": {"exec": {"command": ["true"]}}}}`)
	pod.Spec.RestartPolicy = v1.RestartPolicyOnFailure
	want := daemonSays(t, pod)
	if len(want) != 1 || !strings.Contains(want[0], "declare it as the container's livenessProbe in the pod spec") {
		t.Fatalf("the daemon says %q", want)
	}
	job := &batchv1.Job{Spec: batchv1.JobSpec{Template: v1.PodTemplateSpec{ObjectMeta: pod.ObjectMeta, Spec: pod.Spec}}}
	resp := newValidator().Handle(t.Context(), request(admissionv1.Create, metav1.GroupVersionKind{Group: "batch", Version: "v1", Kind: "Job"}, "batch", mustJSON(t, job), nil))
	if resp.Allowed || resp.Result.Message != "spec.template: "+want[0] {
		t.Errorf("Job: %+v, want refused with %q", resp.Result, "spec.template: "+want[0])
	}
}
