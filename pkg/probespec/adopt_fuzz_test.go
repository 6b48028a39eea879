package probespec

import (
	"encoding/json"
	"testing"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
)

// FuzzAdopt: any pod spec whose probes are valid goes in; out comes a pod
// with the same containers, whose spec keeps exactly the probes Left names
// (each with a reason, untouched), and an annotation that declares, without
// a problem, exactly the other probes the spec declared. A second adoption
// changes nothing.
func FuzzAdopt(f *testing.F) {
	seed := adoptPod()
	b, _ := json.Marshal(seed.Spec)
	f.Add(b)
	f.Add([]byte(`{"containers":[{"name":"a","livenessProbe":{"exec":{"command":["true"]}}}]}`))
	f.Add([]byte(`{"containers":[{"name":"a","ports":[{"name":"p","containerPort":80}],"readinessProbe":{"httpGet":{"port":"p","path":"/x?y=1","httpHeaders":[{"name":"X","value":""}]},"periodSeconds":2}}]}`))
	f.Add([]byte(`{"initContainers":[{"name":"s","restartPolicy":"Always","startupProbe":{"grpc":{"port":9090,"service":"x"},"failureThreshold":30}}],"containers":[{"name":"a"}]}`))
	f.Add([]byte(`{"restartPolicy":"OnFailure","containers":[{"name":"a","livenessProbe":{"exec":{"command":["true"]}},"readinessProbe":{"tcpSocket":{"port":1,"host":"127.0.0.2"}}}]}`))
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
		orig := pod.DeepCopy()
		names := containerNames(pod)
		a, err := AdoptWith(&pod.ObjectMeta, &pod.Spec, AdoptOptions{RawSpec: data})
		if err != nil {
			t.Fatalf("Adopt of a valid pod spec: %v", err)
		}
		if got := containerNames(pod); !equality.Semantic.DeepEqual(got, names) {
			t.Fatalf("containers %v became %v", names, got)
		}
		left := map[string]bool{}
		for _, l := range a.Left {
			if l.Reason == "" {
				t.Fatalf("%s left without a reason", l.Probe)
			}
			left[l.Probe] = true
		}
		for i, list := range [][]v1.Container{pod.Spec.InitContainers, pod.Spec.Containers} {
			was := [][]v1.Container{orig.Spec.InitContainers, orig.Spec.Containers}[i]
			for j, c := range list {
				for _, f := range []struct {
					name      string
					now, then *v1.Probe
				}{{"livenessProbe", c.LivenessProbe, was[j].LivenessProbe}, {"readinessProbe", c.ReadinessProbe, was[j].ReadinessProbe}, {"startupProbe", c.StartupProbe, was[j].StartupProbe}} {
					plainInit := isInit(pod, c.Name) && (c.RestartPolicy == nil || *c.RestartPolicy != v1.ContainerRestartPolicyAlways)
					switch {
					case plainInit:
					case left[c.Name+"/"+f.name] && !equality.Semantic.DeepEqual(f.now, f.then):
						t.Fatalf("%s/%s was left but changed", c.Name, f.name)
					case !left[c.Name+"/"+f.name] && f.now != nil:
						t.Fatalf("container %s keeps a spec probe %s not listed in Left", c.Name, f.name)
					}
				}
			}
		}
		after, problems := DeclaredProbes(pod, ProbeSourceAnnotation)
		if len(problems) != 0 {
			t.Fatalf("the adopted annotation has problems: %v\n%s", problems, pod.Annotations[ProbesAnnotation])
		}
		moved := before[:0:0]
		for _, d := range before {
			if !left[d.Container.Name+"/"+probeFieldName(d.Type)] {
				moved = append(moved, d)
			}
		}
		if len(after) != len(moved) {
			t.Fatalf("%d probes moved from the spec, %d in the annotation (moved %v, left %v)", len(moved), len(after), a.Moved, a.Left)
		}
		for i := range moved {
			if moved[i].Container.Name != after[i].Container.Name || moved[i].Type != after[i].Type ||
				!equality.Semantic.DeepEqual(moved[i].Probe, after[i].Probe) {
				t.Fatalf("probe %d changed: %+v -> %+v", i, moved[i].Probe, after[i].Probe)
			}
		}
		again := pod.DeepCopy()
		if a2, err := AdoptWith(&again.ObjectMeta, &again.Spec, AdoptOptions{RawSpec: data}); err != nil || a2.Changed() || !equality.Semantic.DeepEqual(again, pod) {
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
