package convert

import (
	"errors"
	"fmt"
	"sort"
	"strings"

	yaml "go.yaml.in/yaml/v3"

	"github.com/probed-dev/probed/pkg/probespec"
)

// errLayout: the edit needs a layout the text editor does not handle (flow
// style, a complex key); the document is re-emitted by the encoder instead.
var errLayout = errors.New("layout not editable in place")

// edit replaces src[start:end] with text.
type edit struct {
	start, end int
	text       string
}

// textEditor turns changes into edits of one segment's text. Block-style
// parts are edited as text; a flow collection ({…} or […]) that needs an
// edit is edited as nodes and written out anew in its place, in block style
// (a whole JSON document as JSON).
type textEditor struct {
	l      *layout
	style  style
	parent map[*yaml.Node]*yaml.Node
	edits  []edit
	// flowRoots are the outermost flow collections holding an edit.
	flowRoots []*yaml.Node
	// wasFlow are the collections written in flow style, before reflow
	// made some of them block.
	wasFlow map[*yaml.Node]bool
	// quotes are the offsets where the document's quoted scalars open.
	quotes map[int]bool
}

func newTextEditor(src []byte, doc *yaml.Node) *textEditor {
	e := &textEditor{l: newLayout(src), parent: map[*yaml.Node]*yaml.Node{}, wasFlow: map[*yaml.Node]bool{}}
	var walk func(n *yaml.Node)
	walk = func(n *yaml.Node) {
		e.wasFlow[n] = flow(n)
		for _, c := range n.Content {
			e.parent[c] = n
			walk(c)
		}
	}
	walk(doc)
	e.style = detectStyle(doc, e.l)
	e.quotes = quoteStarts(e.l, doc)
	return e
}

// style is how a document indents, so that added lines look like their
// neighbours: step is a nested mapping's extra indentation, seq a block
// sequence's (0 when "- " sits under its key, as kubectl writes it).
type style struct{ step, seq int }

// detectStyle takes the first nested block mapping and block sequence of
// the document as its style.
func detectStyle(root *yaml.Node, l *layout) style {
	s := style{step: -1, seq: -1}
	var walk func(n *yaml.Node)
	walk = func(n *yaml.Node) {
		if n.Kind == yaml.MappingNode && n.Style&yaml.FlowStyle == 0 {
			for i := 0; i+1 < len(n.Content); i += 2 {
				k, v := n.Content[i], n.Content[i+1]
				if v.Line <= k.Line || v.Style&yaml.FlowStyle != 0 {
					continue
				}
				switch {
				case v.Kind == yaml.MappingNode && s.step < 0 && v.Column > k.Column:
					s.step = v.Column - k.Column
				case v.Kind == yaml.SequenceNode && s.seq < 0 && len(v.Content) > 0:
					if d := dashColumn(l, v.Content[0]); d >= k.Column-1 {
						s.seq = d - (k.Column - 1)
					}
				}
			}
		}
		for _, c := range n.Content {
			walk(c)
		}
	}
	walk(root)
	if s.step <= 0 {
		s.step = 2
	}
	if s.seq < 0 {
		s.seq = 0
	}
	return s
}

// apply makes the edits: from the end, so offsets stay valid; of two
// insertions at one place, the one planned first comes first.
func (e *textEditor) apply() ([]byte, error) {
	if err := e.flowEdits(); err != nil {
		return nil, err
	}
	idx := make([]int, len(e.edits))
	for i := range idx {
		idx[i] = i
	}
	sort.SliceStable(idx, func(a, b int) bool {
		ea, eb := e.edits[idx[a]], e.edits[idx[b]]
		if ea.start != eb.start {
			return ea.start > eb.start
		}
		return idx[a] > idx[b]
	})
	out := append([]byte(nil), e.l.src...)
	limit := len(out)
	for _, i := range idx {
		ed := e.edits[i]
		if ed.end > limit {
			return nil, fmt.Errorf("%w: overlapping edits", errLayout)
		}
		out = append(out[:ed.start], append([]byte(ed.text), out[ed.end:]...)...)
		limit = ed.start
	}
	return out, nil
}

func (e *textEditor) add(start, end int, text string) {
	e.edits = append(e.edits, edit{start, end, text})
}

// block renders lines at an indentation, each ended by the line ending.
func (e *textEditor) block(indent int, lines []string) string {
	var b strings.Builder
	for _, ln := range lines {
		b.WriteString(strings.Repeat(" ", indent))
		b.WriteString(ln)
		b.WriteString(e.l.nl)
	}
	return b.String()
}

// change plans the edits of one template.
func (e *textEditor) change(c *change) error {
	t := c.tmpl.node
	spec := lookup(t, "spec")
	for _, r := range c.removed {
		list := lookup(spec, r.list)
		if list == nil || list.Kind != yaml.SequenceNode || r.index >= len(list.Content) {
			return fmt.Errorf("%w: %s[%d] not found", errLayout, r.list, r.index)
		}
		if err := e.deleteKey(list.Content[r.index], r.field); err != nil {
			return err
		}
	}
	if len(c.annotations) > 0 {
		if err := e.setAnnotations(t, c.annotations); err != nil {
			return err
		}
	}
	if c.addGate {
		return e.addGate(spec)
	}
	return nil
}

func flow(n *yaml.Node) bool { return n != nil && n.Style&yaml.FlowStyle != 0 }

// deleteKey removes key (and its value, and its own comment lines) from
// the block mapping m.
func (e *textEditor) deleteKey(m *yaml.Node, key string) error {
	i := keyIndex(m, key)
	if i < 0 {
		return fmt.Errorf("%w: %s", errLayout, key)
	}
	if r := e.flowRoot(m); r != nil {
		m.Content = append(m.Content[:i], m.Content[i+2:]...)
		e.reflow(m, r)
		return nil
	}
	k, v := m.Content[i], m.Content[i+1]
	last := e.l.entryEnd(k, v)
	if e.l.startsLine(k) {
		first := k.Line
		for first > 1 && e.l.comment(first-1) && e.l.indent(first-1) == k.Column-1 {
			first--
		}
		e.add(e.l.start(first), e.l.next(last), "")
		return nil
	}
	// The first key of a "- " item: the next key moves up to take its place.
	if i+2 < len(m.Content) {
		e.add(e.l.offset(k), e.l.offset(m.Content[i+2]), "")
		return nil
	}
	e.add(e.l.offset(k), e.l.eol(last), "{}")
	return nil
}

// setAnnotations sets the template's annotations, adding metadata and
// annotations when they are missing.
func (e *textEditor) setAnnotations(t *yaml.Node, kvs []keyValue) error {
	meta := lookup(t, "metadata")
	if r := e.flowRoot(t); r != nil || (meta != nil && !nullOrEmpty(meta) && e.wasFlow[meta]) {
		if r == nil {
			r = meta
		}
		return e.setAnnotationNodes(t, r, kvs)
	}
	if meta == nil {
		lines := append([]string{"metadata:", pad(e.style.step) + "annotations:"}, e.entries(kvs, 2*e.style.step)...)
		return e.insertBefore(t, "spec", lines)
	}
	if meta.Kind != yaml.MappingNode || nullOrEmpty(meta) {
		return e.replaceValue(t, "metadata", e.style.step, append([]string{"annotations:"}, e.entries(kvs, e.style.step)...))
	}
	ann := lookup(meta, "annotations")
	switch {
	case ann == nil:
		return e.appendEntries(meta, append([]string{"annotations:"}, e.entries(kvs, e.style.step)...))
	case nullOrEmpty(ann):
		return e.replaceValue(meta, "annotations", e.style.step, e.entries(kvs, 0))
	case ann.Kind != yaml.MappingNode:
		return errLayout
	case e.wasFlow[ann]:
		return e.setAnnotationNodes(t, ann, kvs)
	}
	var add []keyValue
	for _, kv := range kvs {
		i := keyIndex(ann, kv.key)
		if i < 0 {
			add = append(add, kv)
			continue
		}
		if err := e.setScalar(ann.Content[i], ann.Content[i+1], kv.value); err != nil {
			return err
		}
	}
	if len(add) > 0 {
		return e.appendEntries(ann, e.entries(add, 0))
	}
	return nil
}

// addGate adds the probed.io/ready readiness gate to the pod spec.
func (e *textEditor) addGate(spec *yaml.Node) error {
	if spec == nil || spec.Kind != yaml.MappingNode {
		return errLayout
	}
	item := "- conditionType: " + string(probespec.ReadinessGate)
	gates := lookup(spec, "readinessGates")
	if r := e.flowRoot(spec); r != nil || (gates != nil && !nullOrEmpty(gates) && e.wasFlow[gates]) {
		if r == nil {
			r = gates
		}
		e.reflow(spec, r)
		gates = child(spec, "readinessGates", yaml.SequenceNode)
		e.reflow(gates, r)
		gates.Content = append(gates.Content, gateNode())
		return nil
	}
	switch {
	case gates == nil:
		return e.appendEntries(spec, []string{"readinessGates:", pad(e.style.seq) + item})
	case nullOrEmpty(gates):
		return e.replaceValue(spec, "readinessGates", e.style.seq, []string{item})
	case gates.Kind != yaml.SequenceNode:
		return errLayout
	}
	// After the last item, at the items' "- " column.
	first, last := gates.Content[0], gates.Content[len(gates.Content)-1]
	dash := dashColumn(e.l, first)
	if dash < 0 || dashColumn(e.l, last) != dash {
		return errLayout
	}
	end := e.l.blockEnd(last.Line, dash, false)
	e.insertAfterLine(end, e.block(dash, []string{item}))
	return nil
}

// dashColumn is the 0-based column of the "-" that opens the item n, or -1.
func dashColumn(l *layout, n *yaml.Node) int {
	line := l.text(n.Line)
	off := l.offset(n) - l.start(n.Line)
	i := off - 1
	for i >= 0 && line[i] == ' ' {
		i--
	}
	if i < 0 || line[i] != '-' || len(strings.Trim(string(line[:i]), " ")) != 0 {
		return -1
	}
	return i
}

// entries renders key/value annotation entries at an extra indentation.
func (e *textEditor) entries(kvs []keyValue, indent int) []string {
	var out []string
	for _, kv := range kvs {
		first, rest := renderScalar(kv.value, indent+e.style.step)
		out = append(out, pad(indent)+renderKey(kv.key)+":"+first)
		out = append(out, rest...)
	}
	return out
}

// setScalar replaces the value of an existing entry, keeping its key as
// written and a comment on the key's line.
func (e *textEditor) setScalar(k, v *yaml.Node, value string) error {
	colon, ok := e.l.colonAfter(k)
	if !ok || k.Line != e.l.lineOf(colon) {
		return errLayout
	}
	indent := k.Column - 1
	first, rest := renderScalar(value, indent+e.style.step)
	if v.LineComment != "" {
		first += " " + v.LineComment
	}
	last := e.l.entryEnd(k, v)
	text := first
	if len(rest) > 0 {
		text += e.l.nl + strings.TrimSuffix(e.block(0, rest), e.l.nl)
	}
	e.add(colon+1, e.l.eol(last), text)
	return nil
}

// replaceValue replaces the null or empty ({} or []) value of key in m with
// a block of lines indented by indent under the key.
func (e *textEditor) replaceValue(m *yaml.Node, key string, indent int, lines []string) error {
	i := keyIndex(m, key)
	k, v := m.Content[i], m.Content[i+1]
	colon, ok := e.l.colonAfter(k)
	if !ok || k.Line != e.l.lineOf(colon) || (v.Value != "" && v.Line != k.Line) {
		return errLayout
	}
	text := e.l.nl + strings.TrimSuffix(e.block(k.Column-1+indent, lines), e.l.nl)
	if v.LineComment != "" {
		// "key: {} # note" keeps its note on the key's line.
		text = " " + v.LineComment + text
	}
	e.add(colon+1, e.l.eol(e.l.entryEnd(k, v)), text)
	return nil
}

// appendEntries adds lines after the last entry of the block mapping m,
// at its keys' indentation.
func (e *textEditor) appendEntries(m *yaml.Node, lines []string) error {
	if m.Kind != yaml.MappingNode || flow(m) || len(m.Content) == 0 {
		return errLayout
	}
	k, v := m.Content[len(m.Content)-2], m.Content[len(m.Content)-1]
	e.insertAfterLine(e.l.entryEnd(k, v), e.block(m.Content[0].Column-1, lines))
	return nil
}

// insertBefore adds lines before key's entry (and its comment lines) in
// the block mapping m, or after its last entry when key does not start a
// line.
func (e *textEditor) insertBefore(m *yaml.Node, key string, lines []string) error {
	i := keyIndex(m, key)
	if i < 0 || !e.l.startsLine(m.Content[i]) {
		return e.appendEntries(m, lines)
	}
	k := m.Content[i]
	first := k.Line
	for first > 1 && e.l.comment(first-1) && e.l.indent(first-1) == k.Column-1 {
		first--
	}
	e.add(e.l.start(first), e.l.start(first), e.block(k.Column-1, lines))
	return nil
}

// insertAfterLine inserts text after line n (convertSegment makes sure
// the last line has a line ending).
func (e *textEditor) insertAfterLine(n int, text string) {
	at := e.l.next(n)
	e.add(at, at, text)
}

// nullOrEmpty: a value written as nothing, ~, null, {} or [].
func nullOrEmpty(n *yaml.Node) bool {
	switch n.Kind {
	case yaml.ScalarNode:
		return n.Tag == "!!null"
	case yaml.MappingNode, yaml.SequenceNode:
		return len(n.Content) == 0
	}
	return false
}

func pad(n int) string { return strings.Repeat(" ", max(n, 0)) }
