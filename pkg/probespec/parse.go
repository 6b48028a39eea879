package probespec

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strings"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
	kjson "sigs.k8s.io/json"
	"sigs.k8s.io/yaml"
)

// annotationEntry is one annotation key's probes, by type. A nil or
// missing probe is not declared.
type annotationEntry map[ProbeType]*annotatedProbe

// KeepAliveField is the probe field, beside core/v1 Probe's own, that opts
// an httpGet or grpc probe into reusing its connection between runs.
const KeepAliveField = "probed.io/keepAlive"

// annotatedProbe is a probe as the annotation declares it: a core/v1
// Probe plus probed's own fields.
type annotatedProbe struct {
	Probe v1.Probe
	// KeepAlive is KeepAliveField; nil when absent.
	KeepAlive *bool
	// ExpectStatus and ExpectBody are the response checks (httpcheck.go);
	// nil when absent.
	ExpectStatus []int
	ExpectBody   *string
	// PeriodMs and TimeoutMs are the sub-second timing (subsecond.go); nil
	// when absent.
	PeriodMs, TimeoutMs *int32
	// TLS is TLSField (tls.go); nil when absent.
	TLS *tlsField
	// From is FromField (from.go); nil when absent.
	From *string
}

// maxDecodeErrors caps how many decode errors one whole-annotation
// problem lists.
const maxDecodeErrors = 8

// decodeAnnotation decodes the annotation's value strictly, as the API
// server decodes an object under fieldValidation=Strict: field names are
// case-sensitive, and unknown or duplicate fields are errors. The value is
// JSON, or else YAML.
//
// Any error makes the whole annotation unusable: it returns no entries and
// one problem listing up to maxDecodeErrors errors with their paths. An
// empty value (or null) declares nothing.
func decodeAnnotation(raw string) (map[string]annotationEntry, *ProbeProblem) {
	_, entries, problem := decodeAnnotationJSON(raw)
	return entries, problem
}

// decodeAnnotationJSON is decodeAnnotation that also returns the value as
// JSON (annotationJSON), for a caller that reads it again.
func decodeAnnotationJSON(raw string) ([]byte, map[string]annotationEntry, *ProbeProblem) {
	data, err := annotationJSON(raw)
	if err != nil {
		return nil, nil, wholeProblem([]string{oneLine(err.Error())})
	}
	d := decoder{}
	entries := d.decodeTop(data)
	if len(d.errs) > 0 {
		return nil, nil, wholeProblem(d.errs)
	}
	return data, entries, nil
}

// annotationJSON returns the annotation's value as JSON: as is when it is
// valid JSON, converted when it is YAML. What it reads is bounded
// (limits.go): the value's size first, then, before YAML is converted, its
// anchors, aliases and nodes, then the size of the conversion.
func annotationJSON(raw string) ([]byte, error) {
	if err := checkAnnotationSize(raw); err != nil {
		return nil, err
	}
	data := []byte(raw)
	if json.Valid(data) {
		return data, nil
	}
	trimmed := bytes.TrimSpace(data)
	if len(trimmed) == 0 {
		return []byte("null"), nil
	}
	converted, yerr := yamlToJSON(data)
	var limit *limitError
	if errors.As(yerr, &limit) {
		return nil, yerr
	}
	if yerr == nil {
		if yamlHasManyDocuments(raw) {
			return nil, errors.New("holds more than one YAML document")
		}
		if err := yamlKeyCollision(raw); err != nil {
			return nil, err
		}
		return converted, nil
	}
	if trimmed[0] == '{' || trimmed[0] == '[' {
		// Perhaps meant as JSON: its error may point at the mistake better.
		var v any
		var se *json.SyntaxError
		if errors.As(json.Unmarshal(trimmed, &v), &se) {
			return nil, fmt.Errorf("not valid JSON (%v at byte %d) or YAML (%v)", se, se.Offset, yerr)
		}
	}
	return nil, fmt.Errorf("not valid JSON or YAML: %v", yerr)
}

// yamlToJSON converts YAML text as sigs.k8s.io/yaml does (kubectl's
// reading), once checkYAMLBounded has found it safe to.
func yamlToJSON(data []byte) ([]byte, error) {
	if err := checkYAMLBounded(data); err != nil {
		return nil, err
	}
	converted, err := yaml.YAMLToJSONStrict(data)
	if err == nil && len(converted) > MaxAnnotationJSONBytes {
		return nil, limitErrorf(nil, "must have at most %d bytes once converted to JSON, has %d", MaxAnnotationJSONBytes, len(converted))
	}
	return converted, err
}

// yamlHasManyDocuments reports whether YAML text that parsed holds a
// second document, which the converter would silently drop. A document
// marker at column 0 after content starts one; YAML forbids such a line
// inside the first document's scalars.
func yamlHasManyDocuments(text string) bool {
	seenContent, ended := false, false
	for _, line := range strings.Split(text, "\n") {
		line = strings.TrimRight(line, " \t\r")
		isMarker := func(m string) bool {
			return line == m || strings.HasPrefix(line, m+" ") || strings.HasPrefix(line, m+"\t")
		}
		switch {
		case isMarker("---"):
			if seenContent {
				return true
			}
			seenContent = len(line) > 3 // "--- {...}" starts a document with content
		case isMarker("..."):
			ended = seenContent
		case strings.TrimSpace(line) == "", strings.HasPrefix(strings.TrimSpace(line), "#"):
		case strings.HasPrefix(line, "%") && !seenContent:
			// a directive
		default:
			if ended {
				return true
			}
			seenContent = true
		}
	}
	return false
}

// maxWholeDetailBytes caps a malformed annotation's problem text, which is
// logged and sent in an event: the YAML decoder lists every duplicate key,
// and an error may quote what the annotation holds.
const maxWholeDetailBytes = 2 << 10

// wholeProblem makes the one problem for a malformed annotation.
func wholeProblem(errs []string) *ProbeProblem {
	detail := strings.Join(errs, "; ")
	if len(detail) > maxWholeDetailBytes {
		detail = strings.ToValidUTF8(detail[:maxWholeDetailBytes], "") + " ..."
	}
	return &ProbeProblem{Detail: detail, FromAnnotation: true}
}

// decoder walks the annotation's JSON level by level, so that every
// error names where it is, and collects the errors.
type decoder struct {
	errs    []string
	dropped int
}

func (d *decoder) fail(path *field.Path, format string, args ...any) {
	if len(d.errs) >= maxDecodeErrors {
		d.dropped++
		if d.dropped == 1 {
			d.errs = append(d.errs, "and more")
		}
		return
	}
	msg := oneLine(fmt.Sprintf(format, args...))
	if path != nil {
		msg = path.String() + ": " + msg
	}
	d.errs = append(d.errs, msg)
}

// decodeTop decodes {"<container>": {...}, ...}.
func (d *decoder) decodeTop(data []byte) map[string]annotationEntry {
	if kind := jsonKind(data); kind != "object" {
		if kind != "null" {
			d.fail(nil, "must be an object keyed by container name, not %s", kind)
		}
		return nil
	}
	var top map[string]json.RawMessage
	if !d.unmarshal(nil, data, &top) {
		return nil
	}
	keys := make([]string, 0, len(top))
	for k := range top {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	entries := make(map[string]annotationEntry, len(top))
	for _, k := range keys {
		entries[k] = d.decodeContainer(field.NewPath(k), top[k])
	}
	return entries
}

// decodeContainer decodes {"livenessProbe": {...}, "readinessProbe": ..., "startupProbe": ...}.
func (d *decoder) decodeContainer(path *field.Path, data []byte) annotationEntry {
	entry := annotationEntry{}
	switch kind := jsonKind(data); kind {
	case "null":
		return entry
	case "object":
	default:
		d.fail(path, "must be an object with livenessProbe, readinessProbe or startupProbe, not %s", kind)
		return entry
	}
	var fields map[string]json.RawMessage
	if !d.unmarshal(path, data, &fields) {
		return entry
	}
	for _, pt := range probeTypes {
		if raw, ok := fields[pt.field]; ok {
			if p := d.decodeProbe(path.Child(pt.field), raw); p != nil {
				entry[pt.typ] = p
			}
			delete(fields, pt.field)
		}
	}
	unknown := make([]string, 0, len(fields))
	for k := range fields {
		unknown = append(unknown, k)
	}
	sort.Strings(unknown)
	for _, k := range unknown {
		d.fail(path, "unknown field %q: want livenessProbe, readinessProbe or startupProbe", k)
	}
	return entry
}

// decodeProbe decodes one core/v1 Probe with probed's fields; nil for null
// or on error.
func (d *decoder) decodeProbe(path *field.Path, data []byte) *annotatedProbe {
	switch kind := jsonKind(data); kind {
	case "null":
		return nil
	case "object":
	default:
		d.fail(path, "must be an object (a core/v1 Probe), not %s", kind)
		return nil
	}
	// Decoded as strictly as a Probe alone, into a type named Probe so that
	// decode errors read "Go struct field Probe.periodSeconds" as before.
	type Probe struct {
		v1.Probe     `json:",inline"`
		KeepAlive    *bool     `json:"probed.io/keepAlive,omitempty"`
		ExpectStatus []int     `json:"probed.io/expectStatus,omitempty"`
		ExpectBody   *string   `json:"probed.io/expectBody,omitempty"`
		PeriodMs     *int32    `json:"probed.io/periodMilliseconds,omitempty"`
		TimeoutMs    *int32    `json:"probed.io/timeoutMilliseconds,omitempty"`
		TLS          *tlsField `json:"probed.io/tls,omitempty"`
		From         *string   `json:"probed.io/from,omitempty"`
	}
	p := &Probe{}
	if !d.unmarshal(path, data, p) {
		return nil
	}
	return &annotatedProbe{Probe: p.Probe, KeepAlive: p.KeepAlive, ExpectStatus: p.ExpectStatus, ExpectBody: p.ExpectBody,
		PeriodMs: p.PeriodMs, TimeoutMs: p.TimeoutMs, TLS: p.TLS, From: p.From}
}

// unmarshal decodes data strictly into v, recording every error; it
// reports whether there was none.
func (d *decoder) unmarshal(path *field.Path, data []byte, v any) bool {
	strict, err := kjson.UnmarshalStrict(data, v)
	if err != nil {
		d.fail(path, "%s", strings.TrimPrefix(err.Error(), "json: "))
		return false
	}
	for _, e := range strict {
		d.fail(path, "%s", strings.TrimPrefix(e.Error(), "json: "))
	}
	return len(strict) == 0
}

// jsonKind names the kind of the JSON value data holds, by its first byte.
func jsonKind(data []byte) string {
	data = bytes.TrimSpace(data)
	if len(data) == 0 {
		return "null"
	}
	switch data[0] {
	case '{':
		return "object"
	case '[':
		return "an array"
	case '"':
		return "a string"
	case 't', 'f':
		return "a boolean"
	case 'n':
		return "null"
	}
	return "a number"
}

// oneLine folds a multi-line message (YAML's) onto one line.
func oneLine(s string) string {
	if !strings.ContainsAny(s, "\r\n") {
		return s
	}
	return strings.Join(strings.Fields(s), " ")
}
