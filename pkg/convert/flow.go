package convert

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"unicode/utf8"

	yaml "go.yaml.in/yaml/v3"

	"github.com/probed-dev/probed/pkg/probespec"
)

// flowRoot is the outermost flow collection that n is or is inside of, or
// nil when n is in block style.
func (e *textEditor) flowRoot(n *yaml.Node) *yaml.Node {
	var root *yaml.Node
	for ; n != nil; n = e.parent[n] {
		if e.wasFlow[n] {
			root = n
		}
	}
	return root
}

// reflow marks n and its ancestors up to root as block style, to be
// written out anew, and root as the text to replace.
func (e *textEditor) reflow(n, root *yaml.Node) {
	for ; n != nil; n = e.parent[n] {
		n.Style &^= yaml.FlowStyle
		if n == root {
			break
		}
	}
	for _, r := range e.flowRoots {
		if r == root {
			return
		}
	}
	e.flowRoots = append(e.flowRoots, root)
}

// setAnnotationNodes sets annotations in a template whose metadata (or
// annotations) is in flow style, as nodes under root.
func (e *textEditor) setAnnotationNodes(t, root *yaml.Node, kvs []keyValue) error {
	e.reflow(t, root)
	meta := child(t, "metadata", yaml.MappingNode)
	e.reflow(meta, root)
	ann := child(meta, "annotations", yaml.MappingNode)
	e.reflow(ann, root)
	for _, kv := range kvs {
		setNode(ann, kv.key, kv.value)
	}
	return nil
}

// setNode sets key to the string value in the mapping m.
func setNode(m *yaml.Node, key, value string) {
	v := newScalar(m, value)
	if i := keyIndex(m, key); i >= 0 {
		v.LineComment = m.Content[i+1].LineComment
		m.Content[i+1] = v
		return
	}
	m.Content = append(m.Content, newScalar(m, key), v)
}

func gateNode() *yaml.Node {
	return &yaml.Node{Kind: yaml.MappingNode, Tag: "!!map", Content: []*yaml.Node{
		{Kind: yaml.ScalarNode, Tag: "!!str", Value: "conditionType"},
		{Kind: yaml.ScalarNode, Tag: "!!str", Value: string(probespec.ReadinessGate)},
	}}
}

// flowEdits turns each flow root into the edit that writes it anew: in
// block style under its key or "- ", or as indented JSON when it is the
// whole document.
func (e *textEditor) flowEdits() error {
	for _, r := range e.flowRoots {
		start := e.l.offset(r)
		end, ok := closingBracket(e.l.src, start, e.quotes)
		if !ok {
			return fmt.Errorf("%w: unterminated flow collection", errLayout)
		}
		endLine := e.l.lineOf(end - 1)
		rest := strings.TrimSpace(string(e.l.src[end:e.l.eol(endLine)]))
		if rest != "" && !strings.HasPrefix(rest, "#") {
			return fmt.Errorf("%w: text after a flow collection", errLayout)
		}
		comment := ""
		if rest != "" {
			comment = " " + rest
		}
		p := e.parent[r]
		switch {
		case p != nil && p.Kind == yaml.DocumentNode:
			b, err := jsonOf(r, e.jsonIndent())
			if err != nil {
				return err
			}
			e.add(start, end, string(b))
		case p != nil && p.Kind == yaml.MappingNode && !flow(p):
			k := keyOf(p, r)
			colon, ok := e.l.colonAfter(k)
			if !ok || e.l.lineOf(colon) != k.Line {
				return errLayout
			}
			indent := k.Column - 1 + e.style.step
			if r.Kind == yaml.SequenceNode {
				indent = k.Column - 1 + e.style.seq
			}
			body, err := e.render(r, indent)
			if err != nil {
				return err
			}
			e.add(colon+1, e.l.eol(endLine), comment+e.l.nl+strings.TrimSuffix(body, e.l.nl))
		case p != nil && p.Kind == yaml.SequenceNode && !flow(p):
			body, err := e.render(r, r.Column-1)
			if err != nil {
				return err
			}
			first, more, _ := strings.Cut(strings.TrimLeft(strings.TrimSuffix(body, e.l.nl), " "), e.l.nl)
			text := first + comment
			if more != "" {
				text += e.l.nl + more
			}
			e.add(start, e.l.eol(endLine), text)
		default:
			return errLayout
		}
	}
	return nil
}

// render encodes n in block style, every line indented by indent.
func (e *textEditor) render(n *yaml.Node, indent int) (string, error) {
	encodable(n, false)
	var b bytes.Buffer
	enc := yaml.NewEncoder(&b)
	enc.SetIndent(e.style.step)
	if e.style.seq == 0 {
		enc.CompactSeqIndent()
	}
	if err := enc.Encode(n); err != nil {
		return "", err
	}
	if err := enc.Close(); err != nil {
		return "", err
	}
	lines := strings.Split(strings.TrimSuffix(b.String(), "\n"), "\n")
	for i := range lines {
		if lines[i] != "" {
			lines[i] = pad(indent) + lines[i]
		}
	}
	return strings.Join(lines, e.l.nl) + e.l.nl, nil
}

// jsonIndent is the indentation of the document's first indented line.
func (e *textEditor) jsonIndent() string {
	for n := 2; n <= e.l.lines(); n++ {
		if ind := e.l.indent(n); ind > 0 {
			return pad(ind)
		}
	}
	return "  "
}

func keyOf(m, v *yaml.Node) *yaml.Node {
	for i := 1; i < len(m.Content); i += 2 {
		if m.Content[i] == v {
			return m.Content[i-1]
		}
	}
	return nil
}

// closingBracket is the offset just past the flow collection that opens
// at off, skipping comments and the quoted scalars that open at quotes (a
// quote inside a plain scalar, as in {a: it's}, opens nothing).
func closingBracket(src []byte, off int, quotes map[int]bool) (int, bool) {
	depth := 0
	for i := off; i < len(src); i++ {
		switch c := src[i]; c {
		case '{', '[':
			depth++
		case '}', ']':
			depth--
			if depth == 0 {
				return i + 1, true
			}
		case '"', '\'':
			if !quotes[i] {
				continue
			}
			for i++; i < len(src); i++ {
				if c == '"' && src[i] == '\\' {
					i++
					continue
				}
				if src[i] == c {
					if c == '\'' && i+1 < len(src) && src[i+1] == '\'' {
						i++
						continue
					}
					break
				}
			}
		case '#':
			if afterSpace(src, i) {
				i = lineEnd(src, i) - 1
			}
		}
	}
	return 0, false
}

// quoteStarts are the offsets of the opening quotes of the quoted scalars
// in n. yaml.v3 places a scalar at its tag or anchor, if it has one.
func quoteStarts(l *layout, n *yaml.Node) map[int]bool {
	quotes := map[int]bool{}
	var walk func(n *yaml.Node)
	walk = func(n *yaml.Node) {
		if n.Kind == yaml.ScalarNode && n.Style&(yaml.SingleQuotedStyle|yaml.DoubleQuotedStyle) != 0 {
			quotes[skipProperties(l.src, l.offset(n))] = true
		}
		for _, c := range n.Content {
			walk(c)
		}
	}
	walk(n)
	return quotes
}

// skipProperties is the offset after the tags and anchors at off, and the
// spaces, line breaks and comments that follow them.
func skipProperties(src []byte, off int) int {
	for off < len(src) && (src[off] == '!' || src[off] == '&') {
		for off < len(src) && !space(src, off) {
			off++
		}
		for off < len(src) && (space(src, off) || src[off] == '#') {
			if src[off] == '#' {
				off = lineEnd(src, off)
				continue
			}
			off += max(lineBreak(src, off), 1)
		}
	}
	return off
}

// afterSpace: src[i] starts the text or follows a space, a tab or a line
// break, as the '#' of a comment must.
func afterSpace(src []byte, i int) bool {
	if i == 0 {
		return true
	}
	r, size := utf8.DecodeLastRune(src[:i])
	return space(src, i-size) || r == '\ufeff'
}

// jsonOf writes n as JSON in its own key order, indented.
func jsonOf(n *yaml.Node, indent string) ([]byte, error) {
	var b bytes.Buffer
	if err := writeJSON(&b, n); err != nil {
		return nil, err
	}
	var out bytes.Buffer
	if err := json.Indent(&out, b.Bytes(), "", indent); err != nil {
		return nil, err
	}
	return unescapeHTML(out.Bytes()), nil
}

func writeJSON(b *bytes.Buffer, n *yaml.Node) error {
	switch n.Kind {
	case yaml.MappingNode:
		b.WriteByte('{')
		for i := 0; i+1 < len(n.Content); i += 2 {
			if i > 0 {
				b.WriteByte(',')
			}
			var k string
			if err := n.Content[i].Decode(&k); err != nil {
				return err
			}
			kb, _ := json.Marshal(k)
			b.Write(kb)
			b.WriteByte(':')
			if err := writeJSON(b, n.Content[i+1]); err != nil {
				return err
			}
		}
		b.WriteByte('}')
	case yaml.SequenceNode:
		b.WriteByte('[')
		for i, c := range n.Content {
			if i > 0 {
				b.WriteByte(',')
			}
			if err := writeJSON(b, c); err != nil {
				return err
			}
		}
		b.WriteByte(']')
	default:
		var v any
		if err := n.Decode(&v); err != nil {
			return err
		}
		vb, err := json.Marshal(v)
		if err != nil {
			return err
		}
		b.Write(vb)
	}
	return nil
}
