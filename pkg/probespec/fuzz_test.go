package probespec

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// fuzzPod is a pod whose container "app" has one port of the fuzzed
// shape (and "http"), whose "side" init container is a sidecar or not, and
// whose "web" container declares a spec readiness probe on the fuzzed port.
func fuzzPod(annotation, portName string, portNum int32, sidecar bool) *v1.Pod {
	side := v1.Container{Name: "side", Ports: []v1.ContainerPort{{Name: portName, ContainerPort: portNum}}}
	if sidecar {
		always := v1.ContainerRestartPolicyAlways
		side.RestartPolicy = &always
	}
	return &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "p", Annotations: map[string]string{ProbesAnnotation: annotation}},
		Spec: v1.PodSpec{
			InitContainers: []v1.Container{side},
			Containers: []v1.Container{
				{Name: "app", Ports: []v1.ContainerPort{{Name: portName, ContainerPort: portNum}, {Name: "http", ContainerPort: 8080}}},
				{Name: "web", Ports: []v1.ContainerPort{{Name: portName, ContainerPort: portNum}}, ReadinessProbe: &v1.Probe{ProbeHandler: v1.ProbeHandler{TCPSocket: &v1.TCPSocketAction{Port: intstr.FromString(portName)}}}},
			},
		},
	}
}

// FuzzDeclaredProbes feeds arbitrary annotations (and container port shapes)
// to DeclaredProbes under every source, and checks it never panics and
// keeps its promises: deterministic output in the documented order, only
// valid and defaulted probes, a malformed annotation yields exactly one
// problem and no probes from it, a value over MaxAnnotationBytes is
// refused unread, the pod is never modified, and the probes it returns
// (each within the limits, as validateProbe checks) survive a round trip
// through the annotation unchanged.
func FuzzDeclaredProbes(f *testing.F) {
	f.Add(`{"app": {"readinessProbe": {"httpGet": {"path": "/ready", "port": "http"}, "periodSeconds": 2}}}`, "metrics", int32(9090), true)
	f.Add("side:\n  livenessProbe:\n    tcpSocket: {port: metrics}\n", "metrics", int32(9090), true)
	f.Add(`{"app": {"readinesProbe": {}}}`, "http", int32(0), false)
	f.Add(`{"app": {"readinessProbe": {"httpGet": {"port": "http"}, "probed.io/keepAlive": true, "probed.io/expectStatus": [200, 204], "probed.io/expectBody": "^ok$", "probed.io/periodMilliseconds": 100, "probed.io/timeoutMilliseconds": 50}, "livenessProbe": {"grpc": {"port": 9090, "mode": "TLS"}}}}`, "metrics", int32(9090), true)
	f.Fuzz(func(t *testing.T, annotation, portName string, portNum int32, sidecar bool) {
		pod := fuzzPod(annotation, portName, portNum, sidecar)
		before := pod.DeepCopy()
		order := map[string]int{"side": 0, "app": 1, "web": 2}
		if !sidecar {
			order = map[string]int{"app": 1, "web": 2}
		}

		for _, src := range []ProbeSource{ProbeSourceAnnotation, ProbeSourceSpec, ProbeSourceBoth} {
			probes, problems := DeclaredProbes(pod, src)
			again, againProblems := DeclaredProbes(pod, src)
			if !reflect.DeepEqual(probes, again) || !reflect.DeepEqual(problems, againProblems) {
				t.Fatalf("%s: not deterministic", src)
			}
			if !reflect.DeepEqual(pod, before) {
				t.Fatalf("%s: pod modified", src)
			}

			whole := false
			if len(annotation) > MaxAnnotationBytes && src.fromAnnotation() &&
				(len(problems) == 0 || problems[0].Type != nil || !strings.Contains(problems[0].Detail, "must have at most")) {
				t.Fatalf("%s: %d bytes of annotation read: %q", src, len(annotation), problemStrings(problems))
			}
			for _, p := range problems {
				s := p.String()
				if s == "" || p.Detail == "" {
					t.Fatalf("%s: empty problem %+v", src, p)
				}
				if p.Type != nil && (p.Container == "" || !strings.Contains(s, p.Container)) {
					t.Fatalf("%s: probe problem without its container: %+v", src, p)
				}
				if p.FromAnnotation && !src.fromAnnotation() {
					t.Fatalf("%s: annotation problem: %s", src, s)
				}
				if p.Type == nil && p.Container == "" {
					if whole {
						t.Fatalf("%s: two whole-annotation problems", src)
					}
					whole = true
				}
			}
			if whole {
				for _, p := range problems {
					if p.FromAnnotation && (p.Type != nil || p.Container != "") {
						t.Fatalf("%s: malformed annotation, yet problem %s", src, p)
					}
				}
			}

			last := -1
			annotated := map[string]map[string]any{}
			for _, d := range probes {
				rank, ok := order[d.Container.Name]
				if !ok {
					t.Fatalf("%s: probe for a non-target %q", src, d.Container.Name)
				}
				if d.InitContainer != (d.Container.Name == "side") {
					t.Fatalf("%s: %s InitContainer = %v", src, d.Container.Name, d.InitContainer)
				}
				if key := rank*10 + int(d.Type); key <= last {
					t.Fatalf("%s: out of order: %q", src, probeKeysOf(probes))
				} else {
					last = key
				}
				if d.FromAnnotation && (whole || !src.fromAnnotation()) || !d.FromAnnotation && !src.fromSpec() {
					t.Fatalf("%s: %s from the wrong source (whole=%v)", src, probeKeyOf(d), whole)
				}
				if errs := validateProbe(d.Probe, d.Type, &d.Container); len(errs) > 0 {
					t.Fatalf("%s: returned an invalid probe %s: %v", src, probeKeyOf(d), errs)
				}
				defaulted := d.Probe.DeepCopy()
				setProbeDefaults(defaulted)
				if !reflect.DeepEqual(defaulted, d.Probe) || !ProbeSpecEqual(d.Probe, defaulted) {
					t.Fatalf("%s: %s not defaulted", src, probeKeyOf(d))
				}
				if d.FromAnnotation {
					if annotated[d.Container.Name] == nil {
						annotated[d.Container.Name] = map[string]any{}
					}
					annotated[d.Container.Name][probeFieldName(d.Type)] = withExtensions(t, d)
				}
			}

			// The valid annotation probes, written back as an annotation,
			// come back the same and without problems.
			if src != ProbeSourceAnnotation || len(annotated) == 0 {
				continue
			}
			canonical, err := json.Marshal(annotated)
			if err != nil {
				t.Fatalf("marshal: %v", err)
			}
			if len(canonical) > MaxAnnotationBytes {
				continue // as JSON, with the defaults spelt out, over the limit
			}
			round, roundProblems := DeclaredProbes(fuzzPod(string(canonical), portName, portNum, sidecar), ProbeSourceAnnotation)
			if len(roundProblems) != 0 || !reflect.DeepEqual(round, probes) {
				t.Fatalf("round trip through %s changed %q into %q, problems %q",
					canonical, probeKeysOf(probes), probeKeysOf(round), problemStrings(roundProblems))
			}
		}
	})
}

// withExtensions is d's probe as the annotation would declare it, probed's
// extensions included, for the round trip.
func withExtensions(t *testing.T, d DeclaredProbe) map[string]any {
	t.Helper()
	b, err := json.Marshal(d.Probe)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	if d.KeepAlive {
		m[KeepAliveField] = true
	}
	if c := d.HTTPCheck; c != nil {
		if c.Status != nil {
			m[ExpectStatusField] = c.Status
		}
		if c.Body != nil {
			m[ExpectBodyField] = c.Body.String()
		}
	}
	if d.Period > 0 {
		m[PeriodMillisecondsField] = d.Period.Milliseconds()
	}
	if d.Timeout > 0 {
		m[TimeoutMillisecondsField] = d.Timeout.Milliseconds()
	}
	return m
}
