package convert

import (
	"bytes"
	"fmt"
	"reflect"

	yaml "go.yaml.in/yaml/v3"
)

// reemit parses the segment again, applies the changes to the fresh node
// tree and encodes the whole document anew: the safety net for a layout the
// text editor got wrong. Comments and key order survive; the layout is the
// encoder's. New nodes inside flow collections are written as JSON would.
func reemit(seg []byte, changes []*change, st style) ([]byte, error) {
	var doc yaml.Node
	if err := yaml.Unmarshal(seg, &doc); err != nil || len(doc.Content) == 0 {
		return nil, fmt.Errorf("parsing the document again: %v", err)
	}
	fresh := findTemplates(doc.Content[0])
	for _, c := range changes {
		cc := *c
		cc.tmpl.node = nil
		for _, t := range fresh {
			if reflect.DeepEqual(t.path, c.tmpl.path) {
				cc.tmpl = t
			}
		}
		if cc.tmpl.node == nil {
			return nil, fmt.Errorf("template %s not found again", c.tmpl.field())
		}
		if err := editNodes(&cc); err != nil {
			return nil, err
		}
	}
	encodable(&doc, false)
	var b bytes.Buffer
	// Keep the document's own "---" line.
	if first, _, _ := bytes.Cut(seg, []byte("\n")); isMarker(append(first, '\n')) {
		b.WriteString("---\n")
	}
	enc := yaml.NewEncoder(&b)
	enc.SetIndent(st.step)
	if st.seq == 0 {
		enc.CompactSeqIndent()
	}
	if err := enc.Encode(&doc); err != nil {
		return nil, err
	}
	if err := enc.Close(); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}

func editNodes(c *change) error {
	t := c.tmpl.node
	spec := lookup(t, "spec")
	for _, r := range c.removed {
		list := lookup(spec, r.list)
		if list == nil || r.index >= len(list.Content) {
			return fmt.Errorf("%s[%d] not found", r.list, r.index)
		}
		m := list.Content[r.index]
		if i := keyIndex(m, r.field); i >= 0 {
			m.Content = append(m.Content[:i], m.Content[i+2:]...)
		}
	}
	if len(c.annotations) > 0 {
		ann := child(child(t, "metadata", yaml.MappingNode), "annotations", yaml.MappingNode)
		for _, kv := range c.annotations {
			setNode(ann, kv.key, kv.value)
		}
	}
	if c.addGate {
		gates := child(spec, "readinessGates", yaml.SequenceNode)
		item := gateNode()
		item.Style = gates.Style & yaml.FlowStyle
		gates.Content = append(gates.Content, item)
	}
	return nil
}

// child is the collection under key in m, made (or made from a null or
// empty value) when it is not there.
func child(m *yaml.Node, key string, kind yaml.Kind) *yaml.Node {
	i := keyIndex(m, key)
	if i >= 0 && m.Content[i+1].Kind == kind && !nullOrEmpty(m.Content[i+1]) {
		return m.Content[i+1]
	}
	n := &yaml.Node{Kind: kind, Style: m.Style & yaml.FlowStyle}
	if kind == yaml.MappingNode {
		n.Tag = "!!map"
	} else {
		n.Tag = "!!seq"
	}
	if i >= 0 {
		n.LineComment = m.Content[i+1].LineComment
		m.Content[i+1] = n
	} else {
		m.Content = append(m.Content, newScalar(m, key), n)
	}
	return n
}

// newScalar is a string node for parent: double-quoted inside flow style,
// a literal block when it has line breaks.
func newScalar(parent *yaml.Node, s string) *yaml.Node {
	n := &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: s}
	switch {
	case parent.Style&yaml.FlowStyle != 0:
		n.Style = yaml.DoubleQuotedStyle
	case bytes.ContainsRune([]byte(s), '\n'):
		n.Style = yaml.LiteralStyle
	}
	return n
}
