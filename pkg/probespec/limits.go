package probespec

// The annotation is bounded input (contract §1). Anyone who may create or
// patch a pod writes probed.io/probes, and the daemon, the adoption webhook
// and the converter all parse it, so what parsing and running it costs
// must depend on nothing but a small, documented size. The limits are far
// above what a pod's probes need (a large pod's annotation is a few KiB)
// and are named in the InvalidProbe text when hit.

import (
	"fmt"
	"strconv"

	yamlv3 "go.yaml.in/yaml/v3"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

const (
	// MaxAnnotationBytes caps the annotation's value as written: about a
	// hundred and fifty probes. The API server allows 256 KiB for all of a
	// pod's annotations together.
	MaxAnnotationBytes = 32 << 10
	// MaxAnnotationJSONBytes caps the value converted to JSON, which is
	// what is decoded: YAML without aliases converts to at most a few
	// times its size.
	MaxAnnotationJSONBytes = 64 << 10
	// MaxYAMLNodes caps the nodes (scalars, sequences and mappings, keys
	// included) of a value written as YAML; a probe has about twenty.
	// Converting YAML costs a few hundred bytes per node, so this, not the
	// value's size, bounds it for text of many short nodes.
	MaxYAMLNodes = 4096
	// MaxExecArgs and MaxExecBytes cap one exec command: its arguments,
	// and their bytes together. The command is sent to the runtime on
	// every run.
	MaxExecArgs  = 256
	MaxExecBytes = 16 << 10
)

// limitError is an annotation over one of the limits above: its text is
// the InvalidProbe detail as is, not a syntax error.
type limitError struct{ msg string }

func (e *limitError) Error() string { return e.msg }

func limitErrorf(path *field.Path, format string, args ...any) error {
	msg := fmt.Sprintf(format, args...)
	if path != nil {
		msg = path.String() + ": " + msg
	}
	return &limitError{msg: msg}
}

// checkAnnotationSize refuses a value over MaxAnnotationBytes before
// anything reads it.
func checkAnnotationSize(raw string) error {
	if len(raw) > MaxAnnotationBytes {
		return limitErrorf(nil, "must have at most %d bytes, has %d", MaxAnnotationBytes, len(raw))
	}
	return nil
}

// checkYAMLBounded refuses YAML whose conversion could cost more than its
// size: anchors and aliases (an alias repeats its anchor's whole node
// wherever it appears, so a few KiB of text convert to GiB), and more than
// MaxYAMLNodes nodes. yaml.v3's node tree keeps an alias as a reference to
// its anchor and expands nothing, so reading it costs a bounded multiple of
// the text, which MaxAnnotationBytes bounds. It reads the first document
// only, as the converter does. A text yaml.v3 cannot read is an error too:
// what is not known to be free of aliases is never converted.
func checkYAMLBounded(text []byte) error {
	var doc yamlv3.Node
	if err := yamlv3.Unmarshal(text, &doc); err != nil {
		return err
	}
	w := yamlWalk{}
	w.walk(&doc)
	return w.err
}

// yamlWalk counts a YAML tree's nodes and stops at the first anchor, alias
// or node over the limit. It keeps the path as a stack and makes a
// field.Path of it only for the error.
type yamlWalk struct {
	nodes int
	path  []yamlStep
	err   error
}

// yamlStep is one step of a path: a mapping key, or a sequence index.
type yamlStep struct {
	key   string
	index int // when in a sequence
	inSeq bool
}

func (w *yamlWalk) walk(n *yamlv3.Node) {
	if w.err != nil {
		return
	}
	if n.Kind != yamlv3.DocumentNode {
		w.nodes++
	}
	switch {
	case n.Kind == yamlv3.AliasNode:
		w.err = limitErrorf(w.fieldPath(), "must have no YAML aliases: found *%s (YAML anchors and aliases are refused: they expand without limit)", short(n.Value))
	case n.Anchor != "":
		w.err = limitErrorf(w.fieldPath(), "must have no YAML anchors: found &%s (YAML anchors and aliases are refused: they expand without limit)", short(n.Anchor))
	case w.nodes > MaxYAMLNodes:
		w.err = limitErrorf(nil, "must have at most %d YAML nodes (scalars, sequences and mappings, keys included)", MaxYAMLNodes)
	}
	for i, c := range n.Content {
		if w.err != nil {
			return
		}
		switch {
		case n.Kind == yamlv3.MappingNode && i%2 == 1:
			w.path = append(w.path, yamlStep{key: n.Content[i-1].Value})
		case n.Kind == yamlv3.SequenceNode:
			w.path = append(w.path, yamlStep{index: i, inSeq: true})
		default: // a key, or a document's node
			w.walk(c)
			continue
		}
		w.walk(c)
		w.path = w.path[:len(w.path)-1]
	}
}

func (w *yamlWalk) fieldPath() *field.Path {
	var p *field.Path
	for _, s := range w.path {
		if s.inSeq {
			p = p.Index(s.index)
		} else {
			p = childPath(p, s.key)
		}
	}
	return p
}

// short quotes at most 32 bytes of s for a message, with "..." when cut.
func short(s string) string {
	const most = 32
	if len(s) <= most {
		return s
	}
	return strconv.Quote(s[:most]) + "..."
}

// checkExecSize checks one exec command against MaxExecArgs and
// MaxExecBytes.
func checkExecSize(cmd []string, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	if len(cmd) > MaxExecArgs {
		errs = append(errs, &field.Error{Type: field.ErrorTypeTooMany, Field: path.String(), BadValue: len(cmd),
			Detail: fmt.Sprintf("must have at most %d arguments", MaxExecArgs)})
	}
	size := 0
	for _, a := range cmd {
		size += len(a)
	}
	if size > MaxExecBytes {
		errs = append(errs, &field.Error{Type: field.ErrorTypeTooLong, Field: path.String(), BadValue: size,
			Detail: fmt.Sprintf("must have at most %d bytes in all its arguments, has %d", MaxExecBytes, size)})
	}
	return errs
}
