package convert

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	sigsjson "sigs.k8s.io/json"

	"github.com/probed-dev/probed/pkg/probespec"
)

var update = flag.Bool("update", false, "rewrite testdata/*.out.yaml from the converter")

// goldenCase is what each testdata/<name>.in.yaml must give, besides its
// golden output.
var goldenCases = map[string]struct {
	changed   []string // objects changed, in order
	skipped   []string // objects left alone
	reemitted []int
}{
	"comments":             {changed: []string{"Deployment shop/web"}, skipped: []string{"ConfigMap shop/web-config", "Service web"}},
	"kinds":                {changed: []string{"Pod pod", "StatefulSet db", "DaemonSet agent", "ReplicaSet rs", "Job once", "CronJob nightly", "ReplicationController legacy", "PodTemplate tmpl"}},
	"list":                 {changed: []string{"List item 1: Deployment one/a", "List item 3: Pod two/b"}, skipped: []string{"List item 2: ConfigMap untouched"}},
	"sidecar-and-existing": {changed: []string{"Pod mesh", "Pod done-by-hand"}},
	"left-alone":           {skipped: []string{"Deployment keep", "DaemonSet probed-system/probed", "Deployment probed-system/probed-webhook", "Deployment custom"}},
	"workloads":            {changed: []string{"CloneSet shop/web", "StatefulSet db", "Rollout api"}, skipped: []string{"Rollout by-ref"}},
	"empty-values":         {changed: []string{"Deployment empties", "Deployment nulls"}},
	"indented":             {changed: []string{"Deployment four-spaces"}},
	"flow":                 {changed: []string{"Pod json", "Pod flow-container"}, skipped: []string{"ConfigMap c"}},
	"crlf":                 {changed: []string{"Pod crlf"}},
	"no-final-newline":     {changed: []string{"Pod no-final-newline"}},
}

// Each testdata/*.in.yaml converts to its .out.yaml (go test -update
// rewrites them; review the diff). On every case: documents without a
// change are byte for byte the same, every template of the output has no
// spec probes and the gate where it has readiness or startup probes, and
// converting the output again changes nothing.
func TestGolden(t *testing.T) {
	ins, _ := filepath.Glob("testdata/*.in.yaml")
	if len(ins) != len(goldenCases) {
		t.Errorf("%d testdata inputs, %d cases", len(ins), len(goldenCases))
	}
	for _, in := range ins {
		name := strings.TrimSuffix(filepath.Base(in), ".in.yaml")
		t.Run(name, func(t *testing.T) {
			want, ok := goldenCases[name]
			if !ok {
				t.Fatalf("no case for %s", in)
			}
			src, err := os.ReadFile(in)
			if err != nil {
				t.Fatal(err)
			}
			res, err := Convert(src)
			if err != nil {
				t.Fatal(err)
			}
			outPath := strings.TrimSuffix(in, ".in.yaml") + ".out.yaml"
			if *update {
				if err := os.WriteFile(outPath, res.Output, 0o644); err != nil {
					t.Fatal(err)
				}
			}
			golden, err := os.ReadFile(outPath)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(res.Output, golden) {
				t.Errorf("output differs from %s:\n%s", outPath, res.Output)
			}
			var changed, skipped []string
			for _, o := range res.Objects {
				if o.Changed() {
					changed = append(changed, o.Object)
				}
				if o.Skipped != "" {
					skipped = append(skipped, o.Object)
				}
			}
			if !reflect.DeepEqual(changed, want.changed) || !reflect.DeepEqual(skipped, want.skipped) || !reflect.DeepEqual(res.Reemitted, want.reemitted) {
				t.Errorf("changed %q, skipped %q, re-emitted %v; want %q, %q, %v", changed, skipped, res.Reemitted, want.changed, want.skipped, want.reemitted)
			}
			if res.Changed() != (len(want.changed) > 0) {
				t.Errorf("Changed() = %v", res.Changed())
			}
			unchangedDocumentsIdentical(t, src, res)
			templatesAdopted(t, res.Output)

			again, err := Convert(res.Output)
			if err != nil {
				t.Fatalf("converting the output: %v", err)
			}
			if again.Changed() || !bytes.Equal(again.Output, res.Output) {
				t.Errorf("converting the output again changed it:\n%s", again.Output)
			}
		})
	}
}

// unchangedDocumentsIdentical: a document with no changed template is
// copied byte for byte.
func unchangedDocumentsIdentical(t *testing.T, src []byte, res Result) {
	t.Helper()
	touched := map[int]bool{}
	for _, o := range res.Objects {
		touched[o.Document] = touched[o.Document] || o.Changed()
	}
	in, out := splitStream(src), splitStream(res.Output)
	if len(in) != len(out) {
		t.Fatalf("%d documents in, %d out", len(in), len(out))
	}
	for i := range in {
		if !touched[in[i].index] && !bytes.Equal(in[i].src, out[i].src) {
			t.Errorf("document %d has no change but differs:\n%q\n%q", in[i].index, in[i].src, out[i].src)
		}
	}
}

// templatesAdopted: every converted template that probed would run has no
// spec probes left, the gate when it gates, and an annotation the daemon
// parses without a problem.
func templatesAdopted(t *testing.T, out []byte) {
	t.Helper()
	for _, seg := range splitStream(out) {
		res, err := Convert(seg.src)
		if err != nil {
			t.Fatal(err)
		}
		for _, o := range res.Objects {
			if o.Skipped != "" {
				continue
			}
			tmpl := decodeTemplate(t, seg.src, o)
			pod := &v1.Pod{ObjectMeta: tmpl.ObjectMeta, Spec: tmpl.Spec}
			stayed := map[string]bool{}
			for _, l := range o.Adoption.Left {
				stayed[l.Probe] = true
			}
			for _, c := range append(append([]v1.Container(nil), pod.Spec.InitContainers...), pod.Spec.Containers...) {
				if c.RestartPolicy != nil && *c.RestartPolicy != v1.ContainerRestartPolicyAlways {
					continue
				}
				for field, p := range map[string]*v1.Probe{"livenessProbe": c.LivenessProbe, "readinessProbe": c.ReadinessProbe, "startupProbe": c.StartupProbe} {
					if p != nil && !stayed[c.Name+"/"+field] {
						t.Errorf("%s: container %s still has spec probe %s", o.Object, c.Name, field)
					}
				}
			}
			declared, problems := probespec.DeclaredProbes(pod, probespec.ProbeSourceAnnotation)
			if len(problems) > 0 {
				t.Errorf("%s: the daemon finds problems: %v", o.Object, problems)
			}
			gating := false
			for _, d := range declared {
				gating = gating || d.Type.String() != "Liveness"
			}
			if gating != hasGate(pod) {
				t.Errorf("%s: gating probes %v, gate %v", o.Object, gating, hasGate(pod))
			}
		}
	}
}

func hasGate(pod *v1.Pod) bool {
	for _, g := range pod.Spec.ReadinessGates {
		if g.ConditionType == probespec.ReadinessGate {
			return true
		}
	}
	return false
}

// decodeTemplate decodes the template of o from a one-document segment.
func decodeTemplate(t *testing.T, seg []byte, o Object) v1.PodTemplateSpec {
	t.Helper()
	doc, err := decodeGeneric(seg)
	if err != nil {
		t.Fatal(err)
	}
	var tmplNode any = doc
	for _, ref := range findTemplatesIn(t, seg) {
		if ref.object == o.Object {
			tmplNode = at(doc, ref.path)
		}
	}
	// As the API server decodes it: JSON, field names case-sensitive.
	b, err := json.Marshal(tmplNode)
	if err != nil {
		t.Fatal(err)
	}
	var tmpl v1.PodTemplateSpec
	if err := sigsjson.UnmarshalCaseSensitivePreserveInts(b, &tmpl); err != nil {
		t.Fatal(err)
	}
	return tmpl
}

func findTemplatesIn(t *testing.T, seg []byte) []template {
	t.Helper()
	var n yamlNode
	if err := unmarshalNode(seg, &n); err != nil {
		t.Fatal(err)
	}
	if len(n.Content) == 0 {
		return nil
	}
	return findTemplates(n.Content[0])
}

// Errors name the document and the object, and there is no output.
func TestErrors(t *testing.T) {
	malformed := `{"app": {"readinessProbe": `
	pod := &v1.Pod{}
	pod.Annotations = map[string]string{probespec.ProbesAnnotation: malformed}
	_, problems := probespec.DeclaredProbes(pod, probespec.ProbeSourceAnnotation)
	if len(problems) != 1 {
		t.Fatalf("the daemon's problems with %q: %v", malformed, problems)
	}
	daemonSays := problems[0].String()

	good := "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: c}\n"
	for _, c := range []struct {
		name, src string
		want      []string
	}{
		{"malformed annotation", good + "---\napiVersion: apps/v1\nkind: Deployment\nmetadata: {name: web, namespace: shop}\nspec:\n  template:\n    metadata:\n      annotations:\n        probed.io/probes: '" + malformed + "'\n    spec:\n      containers:\n      - name: app\n        livenessProbe: {tcpSocket: {port: 80}}\n",
			[]string{"document 2 (line 4)", "Deployment shop/web (spec.template, line 10)", daemonSays}},
		{"not YAML", good + "---\napiVersion: v1\nkind: Pod\nmetadata: {name: [oops\n",
			[]string{"document 2 (line 4)", "yaml:"}},
		{"template does not decode", "apiVersion: v1\nkind: Pod\nmetadata: {name: p}\nspec:\n  containers:\n  - name: app\n    readinessProbe: {periodSeconds: often}\n",
			[]string{"document 1 (line 1)", "Pod p (the pod, line 1)", "periodSeconds"}},
		{"case matters, as to the API server", "apiVersion: v1\nkind: Pod\nmetadata: {name: p}\nspec:\n  containers:\n  - name: app\n    ReadinessProbe: {tcpSocket: {port: 80}}\n  - name: app2\n    readinessProbe: {tcpSocket: {port: 80}}\n    livenessProbe: {tcpSocket: {port: x}}\n    startupProbe: {exec: {command: 1}}\n",
			[]string{"Pod p", "command"}},
		{"anchor in a changed template", "apiVersion: v1\nkind: Pod\nmetadata: {name: p}\nspec:\n  containers:\n  - &c\n    name: app\n    readinessProbe: {tcpSocket: {port: 80}}\n",
			[]string{"Pod p", "&c", "expand it"}},
		{"two documents without a separator", "a: 1\n...\nb: 2\n",
			[]string{"document 1", "document start"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			res, err := Convert([]byte(c.src))
			if err == nil {
				t.Fatalf("no error; output:\n%s", res.Output)
			}
			var ce *Error
			if !errors.As(err, &ce) {
				t.Errorf("%T is not an *Error", err)
			}
			for _, w := range c.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not contain %q", err, w)
				}
			}
			if res.Output != nil || res.Objects != nil {
				t.Errorf("partial result on error: %+v", res)
			}
		})
	}
}

// Two bad documents: both are reported.
func TestErrorsAreAllReported(t *testing.T) {
	src := "apiVersion: v1\nkind: Pod\nmetadata: {name: a, annotations: {probed.io/probes: '{'}}\nspec: {containers: [{name: x, readinessProbe: {tcpSocket: {port: 1}}}]}\n---\n[\n---\napiVersion: v1\nkind: Pod\nmetadata: {name: b}\n"
	_, err := Convert([]byte(src))
	if err == nil {
		t.Fatal("no error")
	}
	if n := len(unjoin(err)); n != 2 {
		t.Errorf("%d errors, want 2: %v", n, err)
	}
}
