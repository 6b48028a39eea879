package convert

import (
	"fmt"
	"reflect"

	yaml "go.yaml.in/yaml/v3"

	"github.com/probed-dev/probed/pkg/probespec"
)

// decodeGeneric decodes a segment's one document into maps, lists and
// scalars; nil for an empty document.
func decodeGeneric(seg []byte) (any, error) {
	var n yaml.Node
	if err := yaml.Unmarshal(seg, &n); err != nil {
		return nil, err
	}
	if len(n.Content) == 0 {
		return nil, nil
	}
	var v any
	err := n.Content[0].Decode(&v)
	return v, err
}

// expected is what the original document means once the changes are made:
// the same values, with the removed probes gone, the annotations set and
// the gate appended. A converted document must decode to exactly this.
func expected(orig any, changes []*change) (any, error) {
	doc := deepCopy(orig)
	for _, c := range changes {
		t, ok := at(doc, c.tmpl.path).(map[string]any)
		if !ok {
			return nil, fmt.Errorf("template %s not found", c.tmpl.field())
		}
		spec := mapIn(t, "spec")
		for _, r := range c.removed {
			list, _ := spec[r.list].([]any)
			if r.index >= len(list) {
				return nil, fmt.Errorf("%s[%d] not found", r.list, r.index)
			}
			if m, ok := list[r.index].(map[string]any); ok {
				delete(m, r.field)
			}
		}
		if len(c.annotations) > 0 {
			ann := mapIn(mapIn(t, "metadata"), "annotations")
			for _, kv := range c.annotations {
				ann[kv.key] = kv.value
			}
		}
		if c.addGate {
			gates, _ := spec["readinessGates"].([]any)
			spec["readinessGates"] = append(gates, map[string]any{"conditionType": string(probespec.ReadinessGate)})
		}
	}
	return doc, nil
}

// check reports whether the converted segment means exactly want.
func check(seg []byte, want any) error {
	got, err := decodeGeneric(seg)
	if err != nil {
		return err
	}
	if !reflect.DeepEqual(got, want) {
		return fmt.Errorf("the edited document does not read back as intended")
	}
	return nil
}

func at(v any, path []any) any {
	for _, p := range path {
		switch p := p.(type) {
		case string:
			m, _ := v.(map[string]any)
			v = m[p]
		case int:
			l, _ := v.([]any)
			if p >= len(l) {
				return nil
			}
			v = l[p]
		}
	}
	return v
}

// mapIn is m[key] as a map, made when it is missing or not a map.
func mapIn(m map[string]any, key string) map[string]any {
	c, ok := m[key].(map[string]any)
	if !ok {
		c = map[string]any{}
		m[key] = c
	}
	return c
}

func deepCopy(v any) any {
	switch v := v.(type) {
	case map[string]any:
		c := make(map[string]any, len(v))
		for k, x := range v {
			c[k] = deepCopy(x)
		}
		return c
	case []any:
		c := make([]any, len(v))
		for i, x := range v {
			c[i] = deepCopy(x)
		}
		return c
	}
	return v
}
