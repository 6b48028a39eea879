package probespec

import (
	"reflect"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

func httpProbe(path string, port int) *v1.Probe {
	p := &v1.Probe{ProbeHandler: v1.ProbeHandler{HTTPGet: &v1.HTTPGetAction{Path: path, Port: intstr.FromInt32(int32(port)), Scheme: v1.URISchemeHTTP}}}
	setProbeDefaults(p)
	return p
}

func execProbe(cmd ...string) *v1.Probe {
	p := &v1.Probe{ProbeHandler: v1.ProbeHandler{Exec: &v1.ExecAction{Command: cmd}}}
	setProbeDefaults(p)
	return p
}

// adoptPod has a regular container with all three probes, a sidecar with a
// readiness probe and a plain init container with none (it may have none).
func adoptPod() *v1.Pod {
	always := v1.ContainerRestartPolicyAlways
	return &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "ns"},
		Spec: v1.PodSpec{
			InitContainers: []v1.Container{
				{Name: "setup", Image: "img"},
				{Name: "proxy", Image: "img", RestartPolicy: &always, ReadinessProbe: httpProbe("/proxy", 15000)},
			},
			Containers: []v1.Container{{
				Name: "app", Image: "img", Ports: []v1.ContainerPort{{Name: "http", ContainerPort: 8080}},
				LivenessProbe:  execProbe("cat", "/tmp/healthy"),
				ReadinessProbe: httpProbe("/ready", 8080),
				StartupProbe:   &v1.Probe{ProbeHandler: v1.ProbeHandler{TCPSocket: &v1.TCPSocketAction{Port: intstr.FromString("http")}}, FailureThreshold: 30, PeriodSeconds: 10, TimeoutSeconds: 1, SuccessThreshold: 1},
			}},
		},
	}
}

func TestAdoptMovesEverySpecProbe(t *testing.T) {
	pod := adoptPod()
	orig := pod.DeepCopy()
	a, err := Adopt(&pod.ObjectMeta, &pod.Spec)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"app/livenessProbe", "app/readinessProbe", "app/startupProbe", "proxy/readinessProbe"}
	if !reflect.DeepEqual(a.Moved, want) || len(a.Kept) != 0 || !a.GateAdded {
		t.Fatalf("Adoption = %+v; want moved %v and the gate", a, want)
	}
	for _, c := range append(pod.Spec.InitContainers, pod.Spec.Containers...) {
		if c.LivenessProbe != nil || c.ReadinessProbe != nil || c.StartupProbe != nil {
			t.Errorf("container %s still has spec probes", c.Name)
		}
	}
	if got := pod.Annotations[AdoptedAnnotation]; got != strings.Join(want, ",") {
		t.Errorf("%s = %q", AdoptedAnnotation, got)
	}
	if len(pod.Spec.ReadinessGates) != 1 || pod.Spec.ReadinessGates[0].ConditionType != ReadinessGate {
		t.Errorf("readiness gates = %v", pod.Spec.ReadinessGates)
	}
	// probed runs from the annotation exactly the probes the kubelet would
	// have run from the spec.
	fromSpec, problems := DeclaredProbes(orig, ProbeSourceSpec)
	if len(problems) != 0 {
		t.Fatalf("the original spec probes are invalid: %v", problems)
	}
	fromAnnotation, problems := DeclaredProbes(pod, ProbeSourceAnnotation)
	if len(problems) != 0 {
		t.Fatalf("the adopted annotation is invalid: %v", problems)
	}
	if len(fromSpec) != len(fromAnnotation) {
		t.Fatalf("%d probes from the spec, %d from the annotation", len(fromSpec), len(fromAnnotation))
	}
	for i := range fromSpec {
		s, an := fromSpec[i], fromAnnotation[i]
		if s.Container.Name != an.Container.Name || s.Type != an.Type || !equality.Semantic.DeepEqual(s.Probe, an.Probe) {
			t.Errorf("probe %d: spec %s/%v %+v, annotation %s/%v %+v", i, s.Container.Name, s.Type, s.Probe, an.Container.Name, an.Type, an.Probe)
		}
	}
}

func TestAdoptIsIdempotent(t *testing.T) {
	pod := adoptPod()
	if _, err := Adopt(&pod.ObjectMeta, &pod.Spec); err != nil {
		t.Fatal(err)
	}
	once := pod.DeepCopy()
	a, err := Adopt(&pod.ObjectMeta, &pod.Spec)
	if err != nil || a.Changed() {
		t.Fatalf("second Adopt: %+v, %v; want no change", a, err)
	}
	if !equality.Semantic.DeepEqual(once, pod) {
		t.Errorf("a second Adopt changed the pod")
	}
}

// An entry the user already wrote wins, field for field, extensions and
// YAML included; the spec's probe of that container and type is dropped.
func TestAdoptUserEntryWins(t *testing.T) {
	pod := adoptPod()
	pod.Annotations = map[string]string{ProbesAnnotation: "app:\n  readinessProbe:\n    httpGet: {path: /mine, port: 8080}\n    probed.io/keepAlive: true\n"}
	a, err := Adopt(&pod.ObjectMeta, &pod.Spec)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(a.Kept, []string{"app/readinessProbe"}) {
		t.Errorf("kept = %v", a.Kept)
	}
	declared, problems := DeclaredProbes(pod, ProbeSourceAnnotation)
	if len(problems) != 0 {
		t.Fatalf("problems: %v", problems)
	}
	for _, d := range declared {
		if d.Container.Name == "app" && d.Type.String() == "Readiness" {
			if d.Probe.HTTPGet.Path != "/mine" || !d.KeepAlive {
				t.Errorf("the user's readiness probe was replaced: %+v keepAlive=%v", d.Probe.HTTPGet, d.KeepAlive)
			}
		}
	}
	if pod.Spec.Containers[0].ReadinessProbe != nil {
		t.Error("the spec's readiness probe, shadowed by the user's, was left for the kubelet to run")
	}
}

// A malformed annotation is an error with the daemon's InvalidProbe text,
// and the pod is left exactly as it was.
func TestAdoptRefusesAMalformedAnnotation(t *testing.T) {
	pod := adoptPod()
	pod.Annotations = map[string]string{ProbesAnnotation: `{"app": {"readinessProbe": `}
	orig := pod.DeepCopy()
	_, err := Adopt(&pod.ObjectMeta, &pod.Spec)
	_, problems := DeclaredProbes(orig, ProbeSourceAnnotation)
	if err == nil || len(problems) == 0 || err.Error() != problems[0].String() {
		t.Fatalf("err = %v; want the daemon's problem %v", err, problems)
	}
	if !equality.Semantic.DeepEqual(orig, pod) {
		t.Error("a refused adoption changed the pod")
	}
}

func TestAdoptGate(t *testing.T) {
	// Liveness only: nothing gates readiness, no gate.
	pod := &v1.Pod{Spec: v1.PodSpec{Containers: []v1.Container{{Name: "app", LivenessProbe: execProbe("true")}}}}
	if a, err := Adopt(&pod.ObjectMeta, &pod.Spec); err != nil || a.GateAdded || len(pod.Spec.ReadinessGates) != 0 {
		t.Errorf("liveness only: %+v %v, gates %v", a, err, pod.Spec.ReadinessGates)
	}
	// A gate already there is not added twice.
	pod = adoptPod()
	pod.Spec.ReadinessGates = []v1.PodReadinessGate{{ConditionType: "other"}, {ConditionType: ReadinessGate}}
	if a, err := Adopt(&pod.ObjectMeta, &pod.Spec); err != nil || a.GateAdded || len(pod.Spec.ReadinessGates) != 2 {
		t.Errorf("gate present: %+v %v, gates %v", a, err, pod.Spec.ReadinessGates)
	}
	// No probes at all: nothing happens.
	pod = &v1.Pod{Spec: v1.PodSpec{Containers: []v1.Container{{Name: "app"}}}}
	if a, err := Adopt(&pod.ObjectMeta, &pod.Spec); err != nil || a.Changed() || pod.Annotations != nil {
		t.Errorf("no probes: %+v %v %v", a, err, pod.Annotations)
	}
}

func TestOptedOut(t *testing.T) {
	for v, want := range map[string]bool{"false": true, "False": true, "true": false, "": false} {
		meta := &metav1.ObjectMeta{Annotations: map[string]string{InjectAnnotation: v}}
		if got := OptedOut(meta); got != want {
			t.Errorf("%s=%q: OptedOut = %v", InjectAnnotation, v, got)
		}
	}
}

// The webhook carries probed.io/tls as written, and a spec probe with
// upstream's grpc.mode TLS that it adopts stays unverified.
func TestAdoptCarriesTLS(t *testing.T) {
	pod := adoptPod()
	pod.Spec.Volumes = []v1.Volume{{Name: "certs", VolumeSource: v1.VolumeSource{Secret: &v1.SecretVolumeSource{SecretName: "app-tls"}}}}
	pod.Annotations = map[string]string{ProbesAnnotation: "app:\n  readinessProbe:\n    httpGet: {port: 8443, scheme: HTTPS}\n    probed.io/tls: {serverName: app.test, ca: {volume: certs}}\n"}
	tlsMode := v1.GRPCProbeModeTLS
	pod.Spec.Containers[0].LivenessProbe = &v1.Probe{ProbeHandler: v1.ProbeHandler{GRPC: &v1.GRPCAction{Port: 9090, Mode: &tlsMode}}}
	if _, err := AdoptWith(&pod.ObjectMeta, &pod.Spec, AdoptOptions{APIServerGates: APIServerGates{GRPCContainerProbeTLS: true}}); err != nil {
		t.Fatal(err)
	}
	declared, problems := DeclaredProbes(pod, ProbeSourceAnnotation)
	if len(problems) != 0 {
		t.Fatalf("problems: %v", problems)
	}
	seen := 0
	for _, d := range declared {
		switch {
		case d.Container.Name != "app":
		case d.Type == Readiness:
			seen++
			if d.TLS == nil || d.TLS.ServerName != "app.test" || d.TLS.CA == nil {
				t.Errorf("readiness TLS = %+v; want the user's", d.TLS)
			}
		case d.Type == Liveness:
			seen++
			if d.TLS != nil {
				t.Errorf("the adopted grpc TLS probe verifies: %+v", d.TLS)
			}
		}
	}
	if seen != 2 {
		t.Errorf("found %d of app's two probes in %v", seen, probeKeysOf(declared))
	}
}
