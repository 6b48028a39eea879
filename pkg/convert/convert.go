package convert

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"regexp"
	"strconv"
	"strings"

	yaml "go.yaml.in/yaml/v3"

	"github.com/probed-dev/probed/pkg/hostpolicy"
	"github.com/probed-dev/probed/pkg/probespec"
)

// Object is one pod template Convert looked at.
type Object struct {
	// Document is the document's 1-based position in the stream.
	Document int
	// Object names it, e.g. "Deployment shop/web".
	Object string
	// Template is the template's field, e.g. "spec.template"; empty for an
	// object without a pod template, which is Skipped.
	Template string
	// Line is the object's (or its template's) line in the stream.
	Line int
	// Adoption is what probespec.Adopt did.
	Adoption probespec.Adoption
	// Skipped says why the template was left alone, if it was.
	Skipped string
}

// Changed reports whether the template was changed.
func (o Object) Changed() bool { return o.Skipped == "" && o.Adoption.Changed() }

// Result is a converted stream.
type Result struct {
	Output []byte
	// Objects are the pod templates, in the stream's order.
	Objects []Object
	// Reemitted lists the documents (1-based) that were encoded anew
	// instead of edited in place: their templates are in flow style.
	Reemitted []int
}

// Changed reports whether any template was changed.
func (r Result) Changed() bool {
	for _, o := range r.Objects {
		if o.Changed() {
			return true
		}
	}
	return false
}

// Error is a document Convert could not convert.
type Error struct {
	// Document is the 1-based position in the stream; Line is the
	// stream's line where the document starts.
	Document, Line int
	// Object and Template name the object, when the document has one;
	// TemplateLine is the template's line in the stream.
	Object, Template string
	TemplateLine     int
	// Err says what is wrong; line numbers in it count from the stream's
	// start. An errors.Join of several gives one line each.
	Err error
}

func (e *Error) Error() string {
	where := fmt.Sprintf("document %d (line %d)", e.Document, e.Line)
	if e.Object != "" {
		where += fmt.Sprintf(", %s (%s, line %d)", e.Object, e.Template, e.TemplateLine)
	}
	var lines []string
	for _, err := range unjoin(e.Err) {
		lines = append(lines, where+": "+err.Error())
	}
	return strings.Join(lines, "\n")
}

func (e *Error) Unwrap() error { return e.Err }

// unjoin lists the errors an errors.Join holds, or err alone.
func unjoin(err error) []error {
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		return j.Unwrap()
	}
	return []error{err}
}

// Options are what converting needs beyond the manifests.
type Options struct {
	// HostPolicy is the nodes' --probe-host-policy ("" is its default): a
	// probe whose host it refuses on every node stays with the kubelet.
	HostPolicy hostpolicy.Policy
	// APIServerGates are the API server's gates of alpha probe fields that
	// are on: a probe setting a field whose gate is off stays with the
	// kubelet.
	APIServerGates probespec.APIServerGates
}

// Convert is ConvertWith with the default options.
func Convert(src []byte) (Result, error) { return ConvertWith(src, Options{}) }

// ConvertWith moves the spec probes of every pod template in a YAML stream
// into the probed.io/probes annotation and adds the readiness gate (see the
// package doc), leaving with the kubelet what probed would not run as it
// does (each Object's Adoption.Left says which and why). On an error there
// is no output; the error is an *Error, or errors.Join of them when several
// documents fail.
func ConvertWith(src []byte, o Options) (Result, error) {
	var res Result
	var out bytes.Buffer
	var errs []error
	for _, seg := range splitStream(src) {
		converted, objs, reemitted, err := convertSegment(seg, o)
		res.Objects = append(res.Objects, objs...)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if reemitted {
			res.Reemitted = append(res.Reemitted, seg.index)
		}
		out.Write(converted)
	}
	if len(errs) > 0 {
		return Result{}, errors.Join(errs...)
	}
	res.Output = out.Bytes()
	return res, nil
}

func convertSegment(seg segment, o Options) ([]byte, []Object, bool, error) {
	fail := func(t *template, err error) error {
		e := &Error{Document: seg.index, Line: seg.line, Err: err}
		if t != nil {
			e.Object, e.Template, e.TemplateLine = t.object, t.field(), seg.line-1+t.node.Line
		}
		return e
	}
	dec := yaml.NewDecoder(bytes.NewReader(seg.src))
	var doc yaml.Node
	if err := dec.Decode(&doc); err == io.EOF {
		return seg.src, nil, false, nil
	} else if err != nil {
		return nil, nil, false, fail(nil, streamLines(err, seg.line-1))
	}
	var extra yaml.Node
	if err := dec.Decode(&extra); err != io.EOF {
		if err == nil {
			err = errors.New(`a second document follows "..." without a "---" line`)
		}
		return nil, nil, false, fail(nil, streamLines(err, seg.line-1))
	}
	if len(doc.Content) == 0 {
		return seg.src, nil, false, nil
	}
	root := doc.Content[0]
	var changes []*change
	var objs []Object
	templates, skipped := scan(root)
	for _, sk := range skipped {
		objs = append(objs, Object{Document: seg.index, Object: sk.object, Line: seg.line - 1 + sk.line, Skipped: sk.reason})
	}
	for _, t := range templates {
		c, err := planTemplate(t, o)
		if err != nil {
			return nil, nil, false, fail(&t, err)
		}
		objs = append(objs, Object{Document: seg.index, Object: t.object, Template: t.field(), Line: seg.line - 1 + t.node.Line,
			Adoption: c.adoption, Skipped: c.skipped})
		if c.skipped != "" || c.empty() {
			continue
		}
		if a := anchored(t); a != "" {
			return nil, nil, false, fail(&t, fmt.Errorf("the pod template uses the YAML anchor or alias %q; expand it before converting", a))
		}
		changes = append(changes, c)
	}
	if len(changes) == 0 {
		return seg.src, objs, false, nil
	}
	if flow(root) {
		// JSON (or a flow mapping) is written back as JSON: no layout.
		for _, c := range changes {
			for i := range c.annotations {
				c.annotations[i].value = c.annotations[i].compact
			}
		}
	}
	orig, err := decodeGeneric(seg.src)
	if err != nil {
		return nil, nil, false, fail(nil, err)
	}
	want, err := expected(orig, changes)
	if err != nil {
		return nil, nil, false, fail(nil, err)
	}
	// Edit a text whose last line is ended, and give the ending back.
	src, nl := seg.src, ""
	if !endsWithBreak(src) {
		nl = newLayout(src).nl
		src = append(append([]byte(nil), src...), nl...)
	}
	trim := func(out []byte) []byte {
		if nl != "" && !bytes.HasSuffix(out, []byte(nl)) {
			return bytes.TrimSuffix(out, []byte("\n")) // the encoder's
		}
		return bytes.TrimSuffix(out, []byte(nl))
	}
	e := newTextEditor(src, &doc)
	var editErr error
	for _, c := range changes {
		if editErr = e.change(c); editErr != nil {
			break
		}
	}
	if editErr == nil {
		if out, err := e.apply(); err == nil && check(out, want) == nil {
			return trim(out), objs, false, nil
		}
	}
	// A layout the editor got wrong: encode a fresh tree anew.
	out, err := reemit(seg.src, changes, e.style)
	if err == nil {
		err = check(out, want)
	}
	if err != nil {
		return nil, nil, false, fail(nil, fmt.Errorf("internal error: %w", err))
	}
	return trim(out), objs, true, nil
}

// yamlLine is a line number in a YAML error.
var yamlLine = regexp.MustCompile(`\bline (\d+)\b`)

// streamLines turns the line numbers of an error of the YAML decoder, which
// count from its document's start, into the stream's: offset is the lines
// before the document.
func streamLines(err error, offset int) error {
	if offset == 0 {
		return err
	}
	msg := yamlLine.ReplaceAllStringFunc(err.Error(), func(m string) string {
		n, _ := strconv.Atoi(yamlLine.FindStringSubmatch(m)[1])
		return "line " + strconv.Itoa(n+offset)
	})
	return errors.New(msg)
}

// anchored names an anchor or alias in a template or on its way from the
// root: editing it in place would change other parts of the document too.
func anchored(t template) string {
	for _, n := range t.chain {
		if n.Anchor != "" {
			return "&" + n.Anchor
		}
	}
	var walk func(n *yaml.Node) string
	walk = func(n *yaml.Node) string {
		switch {
		case n.Anchor != "":
			return "&" + n.Anchor
		case n.Kind == yaml.AliasNode:
			return "*" + n.Value
		case n.Kind == yaml.ScalarNode && n.Value == "<<" && n.Tag == "!!merge":
			return "<<"
		}
		for _, c := range n.Content {
			if s := walk(c); s != "" {
				return s
			}
		}
		return ""
	}
	return strings.TrimSpace(walk(t.node))
}
