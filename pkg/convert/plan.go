package convert

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"sort"

	yaml "go.yaml.in/yaml/v3"
	v1 "k8s.io/api/core/v1"
	sigsjson "sigs.k8s.io/json"

	"github.com/probed-dev/probed/pkg/probespec"
)

// probeFields are the probe fields Adopt moves, in the order edits are made.
var probeFields = []string{"livenessProbe", "readinessProbe", "startupProbe"}

// change is what converting one template changes, as differences to apply
// to its YAML: the rest of the template is not looked at again.
type change struct {
	tmpl template
	// removed are the spec probes to delete.
	removed []probeRef
	// annotations to set, in this order, with the values to write.
	annotations []keyValue
	addGate     bool
	adoption    probespec.Adoption
	// skipped says why the template was left alone, if it was.
	skipped string
}

type probeRef struct {
	list  string // "containers" or "initContainers"
	index int
	field string
}

// keyValue is an annotation to set. value is laid out for review; compact
// is Adopt's own, for JSON documents.
type keyValue struct{ key, value, compact string }

func (c *change) empty() bool {
	return len(c.removed) == 0 && len(c.annotations) == 0 && !c.addGate
}

// planTemplate decodes a template as the API server would (JSON field names
// are case-sensitive; unknown fields are ignored here and kept in the YAML),
// runs probespec.AdoptWith on it, and records the differences. A probe with
// a field the types do not keep stays in the YAML as written.
func planTemplate(t template, o Options) (*change, error) {
	c := &change{tmpl: t}
	var generic any
	if err := t.node.Decode(&generic); err != nil {
		return nil, err
	}
	data, err := json.Marshal(generic)
	if err != nil {
		return nil, fmt.Errorf("the pod template is not a JSON object: %w", err)
	}
	var before v1.PodTemplateSpec
	if err := sigsjson.UnmarshalCaseSensitivePreserveInts(data, &before); err != nil {
		return nil, fmt.Errorf("the pod template does not decode: %w", err)
	}
	switch {
	case probespec.OptedOut(&before.ObjectMeta):
		c.skipped = fmt.Sprintf("opted out (%s: \"false\")", probespec.InjectAnnotation)
		return c, nil
	case probespec.IsOwn(&before.ObjectMeta):
		// As the webhook: probed never probes itself, nor gates its webhook on itself.
		c.skipped = fmt.Sprintf("probed's own pods (%s: %s) keep their probes", probespec.OwnNameLabel, before.Labels[probespec.OwnNameLabel])
		return c, nil
	case noSpec(lookup(t.node, "spec")):
		c.skipped = "no spec"
		return c, nil
	}
	after := before.DeepCopy()
	var raw struct {
		Spec json.RawMessage `json:"spec"`
	}
	_ = json.Unmarshal(data, &raw) // it decoded above
	c.adoption, err = probespec.AdoptWith(&after.ObjectMeta, &after.Spec, probespec.AdoptOptions{HostPolicy: o.HostPolicy, RawSpec: raw.Spec, APIServerGates: o.APIServerGates})
	if err != nil {
		return nil, err
	}
	if err := validate(after); err != nil {
		return nil, err
	}
	diff := func(list string, b, a []v1.Container) {
		for i := range b {
			for _, f := range probeFields {
				if probe(&b[i], f) != nil && probe(&a[i], f) == nil {
					c.removed = append(c.removed, probeRef{list, i, f})
				}
			}
		}
	}
	diff("initContainers", before.Spec.InitContainers, after.Spec.InitContainers)
	diff("containers", before.Spec.Containers, after.Spec.Containers)
	for _, k := range []string{probespec.ProbesAnnotation, probespec.AdoptedAnnotation} {
		v, ok := after.Annotations[k]
		if old, had := before.Annotations[k]; !ok || (had && old == v) {
			continue
		}
		kv := keyValue{k, v, v}
		if k == probespec.ProbesAnnotation {
			kv.value = indentJSON(v)
		}
		c.annotations = append(c.annotations, kv)
	}
	c.addGate = c.adoption.GateAdded
	return c, nil
}

// validate judges the converted template as the daemon will judge its
// pods (probespec.DeclaredProbes): every problem the daemon would report as
// an InvalidProbe event, with its text. A template that names a container
// only another webhook will inject fails here too: convert cannot know it.
func validate(t *v1.PodTemplateSpec) error {
	if _, ok := t.Annotations[probespec.ProbesAnnotation]; !ok {
		return nil
	}
	_, problems := probespec.DeclaredProbes(&v1.Pod{ObjectMeta: t.ObjectMeta, Spec: t.Spec}, probespec.ProbeSourceAnnotation)
	var errs []error
	for _, p := range problems {
		errs = append(errs, fmt.Errorf("InvalidProbe: %s", p.String()))
	}
	return errors.Join(errs...)
}

// noSpec: the template has no spec, or a null one (spec:, ~), which the
// API server reads as an empty pod spec and refuses; there is nothing to
// adopt and nowhere to put the gate.
func noSpec(spec *yaml.Node) bool {
	return spec == nil || (spec.Kind == yaml.ScalarNode && spec.ShortTag() == "!!null")
}

func probe(c *v1.Container, field string) *v1.Probe {
	switch field {
	case "livenessProbe":
		return c.LivenessProbe
	case "readinessProbe":
		return c.ReadinessProbe
	default:
		return c.StartupProbe
	}
}

// indentJSON lays the annotation out one probe a line, for review in a
// diff, with <, > and & as themselves (the JSON means the same).
func indentJSON(s string) string {
	var entries map[string]map[string]json.RawMessage
	if err := json.Unmarshal([]byte(s), &entries); err != nil || len(entries) == 0 {
		return s
	}
	var b bytes.Buffer
	b.WriteString("{")
	for i, name := range sortedKeys(entries) {
		if i > 0 {
			b.WriteString(",")
		}
		k, _ := json.Marshal(name)
		fmt.Fprintf(&b, "\n  %s: {", k)
		for j, field := range sortedKeys(entries[name]) {
			if j > 0 {
				b.WriteString(",")
			}
			f, _ := json.Marshal(field)
			fmt.Fprintf(&b, "\n    %s: ", f)
			if err := json.Compact(&b, entries[name][field]); err != nil {
				return s
			}
		}
		b.WriteString("\n  }")
	}
	b.WriteString("\n}")
	return string(unescapeHTML(b.Bytes()))
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// unescapeHTML turns encoding/json's \u003c, \u003e and \u0026 escapes
// back into the characters, inside JSON strings only.
func unescapeHTML(in []byte) []byte {
	out := make([]byte, 0, len(in))
	inString := false
	for i := 0; i < len(in); i++ {
		ch := in[i]
		switch {
		case !inString:
			inString = ch == '"'
		case ch == '"':
			inString = false
		case ch == '\\' && i+1 < len(in):
			if in[i+1] == 'u' && i+6 <= len(in) {
				switch string(in[i+2 : i+6]) {
				case "003c":
					out, i = append(out, '<'), i+5
					continue
				case "003e":
					out, i = append(out, '>'), i+5
					continue
				case "0026":
					out, i = append(out, '&'), i+5
					continue
				}
			}
			out = append(out, ch, in[i+1])
			i++
			continue
		}
		out = append(out, ch)
	}
	return out
}
