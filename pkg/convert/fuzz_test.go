package convert

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	yaml "go.yaml.in/yaml/v3"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	sigsyaml "sigs.k8s.io/yaml"

	"github.com/probed-dev/probed/pkg/probespec"
)

// fuzzKinds wrap a pod spec in each workload kind.
var fuzzKinds = []func(tmpl map[string]any) map[string]any{
	func(t map[string]any) map[string]any {
		return map[string]any{"apiVersion": "v1", "kind": "Pod", "metadata": map[string]any{"name": "p"}, "spec": t["spec"]}
	},
	workload("apps/v1", "Deployment"), workload("apps/v1", "StatefulSet"), workload("apps/v1", "DaemonSet"),
	workload("apps/v1", "ReplicaSet"), workload("batch/v1", "Job"),
	func(t map[string]any) map[string]any {
		return map[string]any{"apiVersion": "batch/v1", "kind": "CronJob", "metadata": map[string]any{"name": "c"},
			"spec": map[string]any{"schedule": "* * * * *", "jobTemplate": map[string]any{"spec": map[string]any{"template": t}}}}
	},
}

func workload(apiVersion, kind string) func(map[string]any) map[string]any {
	return func(t map[string]any) map[string]any {
		return map[string]any{"apiVersion": apiVersion, "kind": kind, "metadata": map[string]any{"name": "w", "namespace": "ns"},
			"spec": map[string]any{"template": t}}
	}
}

// fuzzLayouts write a manifest as people and tools do.
var fuzzLayouts = []func(obj map[string]any) ([]byte, error){
	func(obj map[string]any) ([]byte, error) { return sigsyaml.Marshal(obj) }, // kubectl's: "- " under its key
	func(obj map[string]any) ([]byte, error) { // four spaces, indented sequences
		var b bytes.Buffer
		enc := yaml.NewEncoder(&b)
		enc.SetIndent(4)
		err := enc.Encode(obj)
		return b.Bytes(), err
	},
	func(obj map[string]any) ([]byte, error) { return json.MarshalIndent(obj, "", "  ") },
	func(obj map[string]any) ([]byte, error) { return json.Marshal(obj) },
}

const (
	fuzzHead = "# head\napiVersion: v1\nkind: ConfigMap\nmetadata: {name: c}   # kept\ndata:\n  k: 'v'\n"
	fuzzTail = "--- # tail\napiVersion: v1\nkind: Service\nmetadata:\n  name: s\n"
)

// FuzzConvert: any valid pod spec, in any workload kind and any common
// layout, between two other documents, converts into a valid manifest whose
// template has the same containers, the spec probespec.Adopt (the webhook)
// makes of it, no spec probes, an annotation declaring
// exactly the probes the spec declared, and the gate when a probe gates;
// the other documents are byte for byte the same; converting twice is a
// no-op.
func FuzzConvert(f *testing.F) {
	f.Add([]byte(`{"containers":[{"name":"a","livenessProbe":{"exec":{"command":["true"]}}}]}`), uint8(0), uint8(0))
	f.Add([]byte(`{"containers":[{"name":"a","ports":[{"name":"p","containerPort":80}],"readinessProbe":{"httpGet":{"port":"p","path":"/x?y=1&z=<2>","httpHeaders":[{"name":"X","value":""}]},"periodSeconds":2}}]}`), uint8(1), uint8(1))
	f.Add([]byte(`{"initContainers":[{"name":"s","restartPolicy":"Always","startupProbe":{"grpc":{"port":9090,"service":"x"},"failureThreshold":30}}],"containers":[{"name":"a"}],"readinessGates":[{"conditionType":"x"}]}`), uint8(6), uint8(2))
	f.Add([]byte(`{"containers":[{"name":"a","readinessProbe":{"tcpSocket":{"port":1}}},{"name":"b","startupProbe":{"exec":{"command":["sh","-c","a\nb: c"]}}}]}`), uint8(2), uint8(3))
	f.Fuzz(func(t *testing.T, specJSON []byte, kind, layout uint8) {
		var spec v1.PodSpec
		if err := json.Unmarshal(specJSON, &spec); err != nil {
			return
		}
		pod := &v1.Pod{Spec: spec}
		declared, problems := probespec.DeclaredProbes(pod, probespec.ProbeSourceSpec)
		if len(problems) != 0 || duplicateNames(pod) {
			return // not a valid pod spec: the API server would refuse it
		}
		var generic map[string]any
		b, _ := json.Marshal(spec)
		if err := json.Unmarshal(b, &generic); err != nil {
			t.Fatal(err)
		}
		obj := fuzzKinds[int(kind)%len(fuzzKinds)](map[string]any{"spec": generic})
		body, err := fuzzLayouts[int(layout)%len(fuzzLayouts)](obj)
		if err != nil {
			t.Skip(err)
		}
		// A line break ends the document, but no blank line: after a
		// block scalar that keeps its final breaks (|+) it would be part
		// of the value, and the text would no longer mean spec.
		if !bytes.HasSuffix(body, []byte("\n")) {
			body = append(body, '\n')
		}
		if !means(body, obj) {
			// yaml.v3's encoder writes some strings (a line break first,
			// a tab on a line of its own) as block scalars that neither
			// it nor kubectl reads back: not a manifest anyone can apply.
			t.Skip("the layout's encoder wrote text that does not mean the object")
		}
		src := fuzzHead + "---\n" + string(body) + fuzzTail
		res, err := Convert([]byte(src))
		if err != nil {
			t.Fatalf("converting a valid manifest: %v\n%s", err, src)
		}
		out := string(res.Output)
		if !strings.HasPrefix(out, fuzzHead+"---\n") || !strings.HasSuffix(out, "\n"+fuzzTail) {
			t.Fatalf("the other documents changed:\n%s", out)
		}
		res.Objects = slices.DeleteFunc(res.Objects, func(o Object) bool { return o.Template == "" })
		if len(res.Objects) != 1 {
			t.Fatalf("%d templates found, want 1", len(res.Objects))
		}
		tmpl := decodeTemplate(t, splitStream(res.Output)[1].src, res.Objects[0])
		got := &v1.Pod{ObjectMeta: tmpl.ObjectMeta, Spec: tmpl.Spec}
		if a, b := containerNames(pod), containerNames(got); !equality.Semantic.DeepEqual(a, b) {
			t.Fatalf("containers %v became %v", a, b)
		}
		// The webhook's result: probespec.Adopt on the same pod.
		webhook := pod.DeepCopy()
		if _, err := probespec.Adopt(&webhook.ObjectMeta, &webhook.Spec); err != nil {
			t.Fatal(err)
		}
		if !equality.Semantic.DeepEqual(got.Spec, webhook.Spec) {
			t.Fatalf("the converted spec differs from Adopt's:\n%s", out)
		}
		if a, b := got.Annotations[probespec.AdoptedAnnotation], webhook.Annotations[probespec.AdoptedAnnotation]; a != b {
			t.Fatalf("%s: %q converted, %q from Adopt", probespec.AdoptedAnnotation, a, b)
		}
		// What stays in the spec is what adoption left with the kubelet.
		left, _ := probespec.DeclaredProbes(got, probespec.ProbeSourceSpec)
		if len(left) != len(res.Objects[0].Adoption.Left) {
			t.Fatalf("%d spec probes left, Adoption.Left says %v:\n%s", len(left), res.Objects[0].Adoption.Left, out)
		}
		after, problems := probespec.DeclaredProbes(got, probespec.ProbeSourceAnnotation)
		if len(problems) != 0 {
			t.Fatalf("the annotation has problems: %v\n%s", problems, out)
		}
		if len(after) != len(declared)-len(left) {
			t.Fatalf("%d probes declared in the spec, %d in the annotation\n%s", len(declared), len(after), out)
		}
		stayed := map[string]bool{}
		for _, l := range res.Objects[0].Adoption.Left {
			stayed[l.Probe] = true
		}
		moved := declared[:0:0]
		for _, d := range declared {
			if !stayed[d.Container.Name+"/"+strings.ToLower(d.Type.String())+"Probe"] {
				moved = append(moved, d)
			}
		}
		gating := false
		for i := range moved {
			if moved[i].Container.Name != after[i].Container.Name || moved[i].Type != after[i].Type ||
				!equality.Semantic.DeepEqual(moved[i].Probe, after[i].Probe) {
				t.Fatalf("probe %d changed: %+v -> %+v", i, moved[i].Probe, after[i].Probe)
			}
			gating = gating || moved[i].Type.String() != "Liveness"
		}
		if gating != hasGate(got) {
			t.Fatalf("gating probes %v, gate %v\n%s", gating, hasGate(got), out)
		}
		for _, g := range spec.ReadinessGates {
			if !hasCondition(got, g.ConditionType) {
				t.Fatalf("gate %s was lost", g.ConditionType)
			}
		}
		again, err := Convert(res.Output)
		if err != nil || again.Changed() || !bytes.Equal(again.Output, res.Output) {
			t.Fatalf("converting twice is not a no-op (%v):\n%s", err, again.Output)
		}
	})
}

// FuzzConvertText: any text. Convert never panics and never fails its own
// check; what it accepts, it accepts again unchanged.
func FuzzConvertText(f *testing.F) {
	ins, _ := filepath.Glob("testdata/*.in.yaml")
	for _, in := range ins {
		b, err := os.ReadFile(in)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, src []byte) {
		res, err := Convert(src)
		if err != nil {
			if strings.Contains(err.Error(), "internal error") {
				t.Fatalf("%v\n%s", err, src)
			}
			return
		}
		unchangedDocumentsIdentical(t, src, res)
		again, err := Convert(res.Output)
		if err != nil || again.Changed() || !bytes.Equal(again.Output, res.Output) {
			t.Fatalf("converting twice is not a no-op (%v):\n%q\n%q", err, res.Output, again.Output)
		}
	})
}

// means reports whether one YAML document reads as obj.
func means(doc []byte, obj map[string]any) bool {
	v, err := decodeGeneric(doc)
	if err != nil {
		return false
	}
	a, errA := json.Marshal(v)
	b, errB := json.Marshal(obj)
	var got, want any
	return errA == nil && errB == nil && json.Unmarshal(a, &got) == nil && json.Unmarshal(b, &want) == nil &&
		equality.Semantic.DeepEqual(got, want)
}

func containerNames(p *v1.Pod) []string {
	var out []string
	for _, c := range p.Spec.InitContainers {
		out = append(out, fmt.Sprintf("init:%s", c.Name))
	}
	for _, c := range p.Spec.Containers {
		out = append(out, c.Name)
	}
	return out
}

func duplicateNames(p *v1.Pod) bool {
	seen := map[string]bool{}
	for _, c := range append(append([]v1.Container(nil), p.Spec.InitContainers...), p.Spec.Containers...) {
		if seen[c.Name] {
			return true
		}
		seen[c.Name] = true
	}
	return false
}

func hasCondition(p *v1.Pod, c v1.PodConditionType) bool {
	for _, g := range p.Spec.ReadinessGates {
		if g.ConditionType == c {
			return true
		}
	}
	return false
}
