package admission

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	admissionv1 "k8s.io/api/admission/v1"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/probed-dev/probed/pkg/hostpolicy"
	"github.com/probed-dev/probed/pkg/probespec"
)

func newAdopter(reg prometheus.Registerer) *Adopter {
	return &Adopter{
		Scope:   Scope{ExcludedNamespaces: []string{"kube-system", "probed-system"}, OwnNames: DefaultOwnNames()},
		Metrics: NewMetrics(reg),
	}
}

// The patched pod is what probespec.Adopt makes of it, reached through a
// patch the API server can apply to the object as sent.
func TestAdopterPatchesWhatAdoptChanges(t *testing.T) {
	reg := prometheus.NewRegistry()
	a := newAdopter(reg)
	pod := webPod()
	raw := mustJSON(t, pod)
	resp := a.Handle(t.Context(), request(admissionv1.Create, podGVK, "apps", raw, nil))
	if !resp.Allowed || len(resp.Patches) == 0 {
		t.Fatalf("response %+v, want allowed with a patch", resp.AdmissionResponse)
	}
	var got v1.Pod
	if err := json.Unmarshal(applyPatch(t, raw, resp), &got); err != nil {
		t.Fatal(err)
	}
	want := pod.DeepCopy()
	if _, err := probespec.Adopt(&want.ObjectMeta, &want.Spec); err != nil {
		t.Fatal(err)
	}
	if !equality.Semantic.DeepEqual(&got, want) {
		t.Errorf("patched pod differs from Adopt's:\n got %s\nwant %s", mustJSON(t, &got), mustJSON(t, want))
	}
	// The point of it all, spelled out.
	for _, c := range append(got.Spec.Containers, got.Spec.InitContainers[1]) {
		if c.LivenessProbe != nil || c.ReadinessProbe != nil || c.StartupProbe != nil {
			t.Errorf("container %s still has spec probes", c.Name)
		}
	}
	if got.Spec.InitContainers[0].LivenessProbe == nil {
		t.Error("a plain init container's probe was taken: it is no probe target")
	}
	if len(got.Spec.ReadinessGates) != 1 || got.Spec.ReadinessGates[0].ConditionType != probespec.ReadinessGate {
		t.Errorf("readiness gates %v", got.Spec.ReadinessGates)
	}
	if ad := got.Annotations[probespec.AdoptedAnnotation]; ad != "app/livenessProbe,app/readinessProbe,app/startupProbe,proxy/livenessProbe" {
		t.Errorf("%s = %q", probespec.AdoptedAnnotation, ad)
	}
	declared, problems := probespec.DeclaredProbes(&got, probespec.ProbeSourceAnnotation)
	if len(declared) != 4 || len(problems) != 0 {
		t.Errorf("the adopted pod declares %d probes with problems %v, want 4 and none", len(declared), problems)
	}
	if n := testutil.ToFloat64(a.Metrics.requests.WithLabelValues("adopt", OutcomeAdopted)); n != 1 {
		t.Errorf("adopted count %v, want 1", n)
	}

	// Reinvocation (or a second webhook call) changes nothing.
	again := a.Handle(t.Context(), request(admissionv1.Create, podGVK, "apps", applyPatch(t, raw, resp), nil))
	if !again.Allowed || len(again.Patches) != 0 {
		t.Errorf("second admission: allowed=%v patches %s, want none", again.Allowed, mustJSON(t, again.Patches))
	}
}

// Fields this build's types do not know (a newer API server's) survive:
// the patch touches only what adoption changes.
func TestAdopterKeepsUnknownFields(t *testing.T) {
	raw := []byte(`{"apiVersion":"v1","kind":"Pod","metadata":{"name":"p","futureMeta":"x"},
	  "spec":{"futureSpec":{"a":1},"containers":[{"name":"app","image":"app","futureContainer":true,
	    "readinessProbe":{"exec":{"command":["true"]}}}],"readinessGates":[{"conditionType":"other","futureGate":1}]}}`)
	_, s := admitRaw(t, newAdopter(prometheus.NewRegistry()), raw)
	for _, keep := range []string{`"futureMeta":"x"`, `"futureSpec":{"a":1}`, `"futureContainer":true`, `"futureGate":1`} {
		if !strings.Contains(s, keep) {
			t.Errorf("lost %s: %s", keep, s)
		}
	}
	if strings.Contains(s, `"readinessProbe":{"exec"`) {
		t.Errorf("the spec probe is still there: %s", s)
	}
	if !strings.Contains(s, `{"conditionType":"probed.io/ready"}`) {
		t.Errorf("no gate appended: %s", s)
	}
}

// admitRaw runs a pod create as sent through a, and returns the response
// and the object it patches, as compact JSON.
func admitRaw(t *testing.T, a *Adopter, raw []byte) (admission.Response, string) {
	t.Helper()
	resp := a.Handle(t.Context(), request(admissionv1.Create, podGVK, "apps", raw, nil))
	if !resp.Allowed {
		t.Fatalf("denied: %v", resp.Result)
	}
	var got map[string]any
	if err := json.Unmarshal(applyPatch(t, raw, resp), &got); err != nil {
		t.Fatal(err)
	}
	return resp, string(mustJSON(t, got))
}

// A probe carrying a field this build does not know (invented here) stays
// in the spec exactly as sent, with a warning that names the field; the
// pod's other probes still move. The webhook compares the JSON as sent with
// what its types keep: its typed decode drops the field silently.
func TestAdopterLeavesProbesWithUnknownFieldsUntouched(t *testing.T) {
	raw := []byte(`{"apiVersion":"v1","kind":"Pod","metadata":{"name":"p"},"spec":{"containers":[{"name":"app","image":"app",
	  "livenessProbe":{"httpGet":{"port":8080,"path":"/healthz","probedTestOnlyWire":"h9"},"periodSeconds":3},
	  "readinessProbe":{"exec":{"command":["true"]}}}]}}`)
	a := newAdopter(prometheus.NewRegistry())
	resp, s := admitRaw(t, a, raw)
	if !strings.Contains(s, `"livenessProbe":{"httpGet":{"path":"/healthz","port":8080,"probedTestOnlyWire":"h9"},"periodSeconds":3}`) {
		t.Errorf("the liveness probe did not stay as sent: %s", s)
	}
	if strings.Contains(s, `"readinessProbe":{`) { // in the spec; the annotation's is escaped
		t.Errorf("the readiness probe did not move: %s", s)
	}
	want := `probed: app/livenessProbe stays with the kubelet: it sets "httpGet.probedTestOnlyWire", which this build of probed does not know`
	if len(resp.Warnings) != 1 || resp.Warnings[0] != want {
		t.Errorf("warnings %q, want [%q]", resp.Warnings, want)
	}
	if n := testutil.ToFloat64(a.Metrics.leftProbes.WithLabelValues("liveness")); n != 1 {
		t.Errorf("probed_webhook_probes_left_total{probe_type=liveness} = %v, want 1", n)
	}
}

// The adoption rules reach the response: each probe left with the kubelet
// is one warning, also when nothing else changes.
func TestAdopterWarnsForEveryProbeLeft(t *testing.T) {
	pod := webPod()
	pod.Spec.RestartPolicy = v1.RestartPolicyOnFailure
	pod.Spec.InitContainers[1].StartupProbe = execProbe("true")
	a := newAdopter(prometheus.NewRegistry())
	a.HostPolicy = hostpolicy.PodIPs
	pod.Spec.Containers[0].ReadinessProbe.HTTPGet.Host = "10.0.0.1"
	resp := a.Handle(t.Context(), request(admissionv1.Create, podGVK, "apps", mustJSON(t, pod), nil))
	if !resp.Allowed {
		t.Fatalf("denied: %v", resp.Result)
	}
	var left []string
	for _, w := range resp.Warnings {
		probe, _, ok := strings.Cut(strings.TrimPrefix(w, "probed: "), " stays with the kubelet: ")
		if !ok {
			t.Errorf("warning %q", w)
		}
		left = append(left, probe)
	}
	want := []string{"proxy/startupProbe", "app/livenessProbe", "app/readinessProbe", "app/startupProbe"}
	if strings.Join(left, ",") != strings.Join(want, ",") {
		t.Errorf("warnings for %v, want %v (%q)", left, want, resp.Warnings)
	}

	// Nothing left to move, still said.
	only := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p"}, Spec: v1.PodSpec{RestartPolicy: v1.RestartPolicyOnFailure,
		Containers: []v1.Container{{Name: "app", Image: "app", LivenessProbe: execProbe("true")}}}}
	resp = newAdopter(prometheus.NewRegistry()).Handle(t.Context(), request(admissionv1.Create, podGVK, "apps", mustJSON(t, only), nil))
	if !resp.Allowed || len(resp.Patches) != 0 || len(resp.Warnings) != 1 {
		t.Errorf("allowed=%v patches=%d warnings %q", resp.Allowed, len(resp.Patches), resp.Warnings)
	}
}

func TestAdopterAnnotationShapes(t *testing.T) {
	for name, meta := range map[string]string{
		"absent": `{"name":"p"}`,
		"null":   `{"name":"p","annotations":null}`,
		"empty":  `{"name":"p","annotations":{}}`,
		"others": `{"name":"p","annotations":{"a/b~c":"1"}}`,
		"user's": `{"name":"p","annotations":{"probed.io/probes":"{\"app\":{\"livenessProbe\":{\"tcpSocket\":{\"port\":1}}}}"}}`,
	} {
		t.Run(name, func(t *testing.T) {
			raw := []byte(`{"apiVersion":"v1","kind":"Pod","metadata":` + meta + `,"spec":{"containers":[{"name":"app","image":"app",
			  "livenessProbe":{"exec":{"command":["true"]}},"readinessProbe":{"exec":{"command":["true"]}}}]}}`)
			var pod v1.Pod
			if err := json.Unmarshal(raw, &pod); err != nil {
				t.Fatal(err)
			}
			want := pod.DeepCopy()
			if _, err := probespec.Adopt(&want.ObjectMeta, &want.Spec); err != nil {
				t.Fatal(err)
			}
			resp := newAdopter(prometheus.NewRegistry()).Handle(t.Context(), request(admissionv1.Create, podGVK, "apps", raw, nil))
			var got v1.Pod
			if err := json.Unmarshal(applyPatch(t, raw, resp), &got); err != nil {
				t.Fatal(err)
			}
			if !equality.Semantic.DeepEqual(got.Annotations, want.Annotations) {
				t.Errorf("annotations %v, want %v", got.Annotations, want.Annotations)
			}
		})
	}
}

func TestAdopterLeavesAlone(t *testing.T) {
	optedOut := webPod()
	optedOut.Annotations = map[string]string{probespec.InjectAnnotation: "False"}
	own := webPod()
	own.Labels[NameLabel] = "probed"
	mirror := webPod()
	mirror.Annotations = map[string]string{v1.MirrorPodAnnotationKey: "abc123"}
	for _, tc := range []struct {
		name string
		op   admissionv1.Operation
		ns   string
		pod  *v1.Pod
		why  string
	}{
		{"kube-system", admissionv1.Create, "kube-system", webPod(), "excluded namespace"},
		{"probed's namespace", admissionv1.Create, "probed-system", webPod(), "excluded namespace"},
		{"probed's own pod", admissionv1.Create, "apps", own, "probed's own pod"},
		{"opted out", admissionv1.Create, "apps", optedOut, "opted out"},
		{"an update", admissionv1.Update, "apps", webPod(), "not a pod being created"},
		{"a mirror pod", admissionv1.Create, "apps", mirror, "a mirror pod"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			reg := prometheus.NewRegistry()
			a := newAdopter(reg)
			resp := a.Handle(t.Context(), request(tc.op, podGVK, tc.ns, mustJSON(t, tc.pod), nil))
			if !resp.Allowed || len(resp.Patches) != 0 || resp.Result.Message != tc.why {
				t.Errorf("allowed=%v patches=%d message %q, want allowed, unpatched, %q", resp.Allowed, len(resp.Patches), resp.Result.Message, tc.why)
			}
			if n := testutil.ToFloat64(a.Metrics.requests.WithLabelValues("adopt", OutcomeSkipped)); n != 1 {
				t.Errorf("skipped count %v, want 1", n)
			}
		})
	}
}

// A pod with nothing to move is admitted as is.
func TestAdopterNothingToAdopt(t *testing.T) {
	pod := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p"}, Spec: v1.PodSpec{Containers: []v1.Container{{Name: "app", Image: "app"}}}}
	resp := newAdopter(prometheus.NewRegistry()).Handle(t.Context(), request(admissionv1.Create, podGVK, "apps", mustJSON(t, pod), nil))
	if !resp.Allowed || len(resp.Patches) != 0 {
		t.Errorf("allowed=%v patches %s", resp.Allowed, mustJSON(t, resp.Patches))
	}
}

// A malformed annotation is refused with the daemon's own words.
func TestAdopterRefusesMalformedAnnotation(t *testing.T) {
	pod := webPod()
	pod.Annotations = map[string]string{probespec.ProbesAnnotation: `{"app": {"readinessProbe": {"perodSeconds": 2}}}`}
	_, problems := probespec.DeclaredProbes(pod, probespec.ProbeSourceAnnotation)
	if len(problems) != 1 || problems[0].Type != nil {
		t.Fatalf("the daemon's problems: %v, want one whole-annotation problem", problems)
	}
	resp := newAdopter(prometheus.NewRegistry()).Handle(t.Context(), request(admissionv1.Create, podGVK, "apps", mustJSON(t, pod), nil))
	if resp.Allowed || resp.Result.Code != http.StatusUnprocessableEntity || resp.Result.Reason != metav1.StatusReasonInvalid {
		t.Fatalf("response %+v, want a 422 Invalid refusal", resp.Result)
	}
	if resp.Result.Message != problems[0].String() {
		t.Errorf("message %q, want the daemon's %q", resp.Result.Message, problems[0].String())
	}
}

func TestAdopterUndecodable(t *testing.T) {
	resp := newAdopter(prometheus.NewRegistry()).Handle(t.Context(), request(admissionv1.Create, podGVK, "apps", []byte(`{"spec":7}`), nil))
	if resp.Allowed || resp.Result.Code != http.StatusBadRequest {
		t.Errorf("response %+v, want 400", resp.Result)
	}
}

func TestPodPatchGates(t *testing.T) {
	other := v1.PodReadinessGate{ConditionType: "other"}
	gate := v1.PodReadinessGate{ConditionType: probespec.ReadinessGate}
	for _, tc := range []struct {
		name          string
		before, after []v1.PodReadinessGate
		want          string
	}{
		{"none", nil, nil, `null`},
		{"first", nil, []v1.PodReadinessGate{gate}, `[{"op":"add","path":"/spec/readinessGates","value":[{"conditionType":"probed.io/ready"}]}]`},
		{"appended", []v1.PodReadinessGate{other}, []v1.PodReadinessGate{other, gate}, `[{"op":"add","path":"/spec/readinessGates/-","value":{"conditionType":"probed.io/ready"}}]`},
		{"rewritten", []v1.PodReadinessGate{other}, []v1.PodReadinessGate{gate}, `[{"op":"add","path":"/spec/readinessGates","value":[{"conditionType":"probed.io/ready"}]}]`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := string(mustJSON(t, appendGateOps(nil, tc.before, tc.after)))
			if got != tc.want {
				t.Errorf("got %s, want %s", got, tc.want)
			}
		})
	}
}

func TestEscape(t *testing.T) {
	if got := escape("probed.io/pro~bes"); got != "probed.io~1pro~0bes" {
		t.Errorf("escape = %q", got)
	}
}

// Mutating admission runs before Pod Security and before the API server
// drops the alpha fields whose gates are off: a probe with a host, or with
// httpGet.protocol or grpc.mode (gates off), stays in the spec, where the
// API server does to it what it would do without probed, and a warning
// says why, whole.
func TestAdopterLeavesWhatTheAPIServerStillJudges(t *testing.T) {
	tls := v1.GRPCProbeModeTLS
	pod := webPod()
	pod.Spec.Containers[0].ReadinessProbe.HTTPGet.Host = "10.0.0.1" // routable: the host policy allows it
	pod.Spec.Containers[0].LivenessProbe = &v1.Probe{ProbeHandler: v1.ProbeHandler{GRPC: &v1.GRPCAction{Port: 9090, Mode: &tls}}}
	a := newAdopter(prometheus.NewRegistry())
	resp := a.Handle(t.Context(), request(admissionv1.Create, podGVK, "apps", mustJSON(t, pod), nil))
	if !resp.Allowed {
		t.Fatalf("denied: %v", resp.Result)
	}
	want := map[string]string{
		"app/readinessProbe": "it sets httpGet.host: Pod Security (baseline, 1.34+) forbids host in probes",
		"app/livenessProbe":  "grpc.mode TLS is alpha: the API server drops it after admission unless its GRPCContainerProbeTLS gate is on",
	}
	for _, w := range resp.Warnings {
		if strings.HasSuffix(w, "…") {
			t.Errorf("warning truncated: %q", w)
		}
		probe, why, _ := strings.Cut(strings.TrimPrefix(w, "probed: "), " stays with the kubelet: ")
		if part, ok := want[probe]; ok {
			if !strings.Contains(why, part) {
				t.Errorf("%s: %q does not say %q", probe, why, part)
			}
			delete(want, probe)
		}
	}
	if len(want) > 0 {
		t.Errorf("no warning for %v: %q", want, resp.Warnings)
	}
	after := &v1.Pod{}
	if err := json.Unmarshal(applyPatch(t, mustJSON(t, pod), resp), after); err != nil {
		t.Fatal(err)
	}
	if c := after.Spec.Containers[0]; c.ReadinessProbe == nil || c.ReadinessProbe.HTTPGet.Host != "10.0.0.1" || c.LivenessProbe == nil || c.LivenessProbe.GRPC.Mode == nil {
		t.Errorf("the probes left the spec: %+v", c)
	}
	if ann := after.Annotations[probespec.ProbesAnnotation]; strings.Contains(ann, "10.0.0.1") || strings.Contains(ann, "TLS") {
		t.Errorf("the annotation holds them: %s", ann)
	}

	// Told the gate is on, the webhook moves the gRPC probe.
	a.APIServerGates = probespec.APIServerGates{GRPCContainerProbeTLS: true}
	resp = a.Handle(t.Context(), request(admissionv1.Create, podGVK, "apps", mustJSON(t, pod), nil))
	after = &v1.Pod{}
	if err := json.Unmarshal(applyPatch(t, mustJSON(t, pod), resp), after); err != nil {
		t.Fatal(err)
	}
	if after.Spec.Containers[0].LivenessProbe != nil || !strings.Contains(after.Annotations[probespec.ProbesAnnotation], `"mode":"TLS"`) {
		t.Errorf("with the gate on, the gRPC probe stayed: %+v %s", after.Spec.Containers[0].LivenessProbe, after.Annotations[probespec.ProbesAnnotation])
	}
}
