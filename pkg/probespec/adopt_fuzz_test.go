package probespec

import (
	"encoding/json"
	"testing"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
)

// FuzzAdopt: any pod spec whose probes are valid goes in; out comes a pod
// with the same containers, no spec probes, and an annotation that
// declares, without a problem, exactly the probes the spec declared. A
// second adoption changes nothing.
func FuzzAdopt(f *testing.F) {
	seed := adoptPod()
	b, _ := json.Marshal(seed.Spec)
	f.Add(b)
	f.Add([]byte(`{"containers":[{"name":"a","livenessProbe":{"exec":{"command":["true"]}}}]}`))
	f.Add([]byte(`{"containers":[{"name":"a","ports":[{"name":"p","containerPort":80}],"readinessProbe":{"httpGet":{"port":"p","path":"/x?y=1","httpHeaders":[{"name":"X","value":""}]},"periodSeconds":2}}]}`))
	f.Add([]byte(`{"initContainers":[{"name":"s","restartPolicy":"Always","startupProbe":{"grpc":{"port":9090,"service":"x"},"failureThreshold":30}}],"containers":[{"name":"a"}]}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		var spec v1.PodSpec
		if err := json.Unmarshal(data, &spec); err != nil {
			return
		}
		pod := &v1.Pod{Spec: spec}
		if !uniqueNames(pod) {
			return // the API server refuses empty or repeated container names
		}
		before, problems := DeclaredProbes(pod, ProbeSourceSpec)
		if len(problems) != 0 {
			return // not a valid pod spec: the API server would refuse it
		}
		names := containerNames(pod)
		a, err := Adopt(&pod.ObjectMeta, &pod.Spec)
		if err != nil {
			t.Fatalf("Adopt of a valid pod spec: %v", err)
		}
		if got := containerNames(pod); !equality.Semantic.DeepEqual(got, names) {
			t.Fatalf("containers %v became %v", names, got)
		}
		for _, c := range append(append([]v1.Container(nil), pod.Spec.InitContainers...), pod.Spec.Containers...) {
			if c.LivenessProbe != nil || c.ReadinessProbe != nil || c.StartupProbe != nil {
				if c.RestartPolicy != nil && *c.RestartPolicy == v1.ContainerRestartPolicyAlways || !isInit(pod, c.Name) {
					t.Fatalf("container %s keeps a spec probe", c.Name)
				}
			}
		}
		after, problems := DeclaredProbes(pod, ProbeSourceAnnotation)
		if len(problems) != 0 {
			t.Fatalf("the adopted annotation has problems: %v\n%s", problems, pod.Annotations[ProbesAnnotation])
		}
		if len(after) != len(before) {
			t.Fatalf("%d probes declared in the spec, %d in the annotation (moved %v)", len(before), len(after), a.Moved)
		}
		for i := range before {
			if before[i].Container.Name != after[i].Container.Name || before[i].Type != after[i].Type ||
				!equality.Semantic.DeepEqual(before[i].Probe, after[i].Probe) {
				t.Fatalf("probe %d changed: %+v -> %+v", i, before[i].Probe, after[i].Probe)
			}
		}
		again := pod.DeepCopy()
		if a2, err := Adopt(&again.ObjectMeta, &again.Spec); err != nil || a2.Changed() || !equality.Semantic.DeepEqual(again, pod) {
			t.Fatalf("a second adoption changed the pod: %+v %v", a2, err)
		}
	})
}

// uniqueNames reports whether every container and init container has a
// name of its own, as the API server requires.
func uniqueNames(p *v1.Pod) bool {
	seen := map[string]bool{}
	for _, cs := range [][]v1.Container{p.Spec.InitContainers, p.Spec.Containers} {
		for _, c := range cs {
			if c.Name == "" || seen[c.Name] {
				return false
			}
			seen[c.Name] = true
		}
	}
	return true
}

func containerNames(p *v1.Pod) []string {
	var out []string
	for _, c := range p.Spec.InitContainers {
		out = append(out, "init:"+c.Name)
	}
	for _, c := range p.Spec.Containers {
		out = append(out, c.Name)
	}
	return out
}

func isInit(p *v1.Pod, name string) bool {
	for _, c := range p.Spec.InitContainers {
		if c.Name == name {
			return true
		}
	}
	return false
}
