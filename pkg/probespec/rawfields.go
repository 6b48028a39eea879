package probespec

import (
	"bytes"
	"encoding/json"
	"reflect"
	"sort"
	"strconv"

	v1 "k8s.io/api/core/v1"
	kjson "sigs.k8s.io/json"
)

// ProbeFieldsNotKept reads rawSpec, a pod spec as a client sent it (JSON),
// and returns for each spec probe the fields that this build's API types do
// not keep as written, keyed "<container>/<probe field>": what a typed
// decode and encode of the probe would lose or change. A newer API server
// passes fields this build does not know (upstream's h2c and gRPC-TLS fields
// reached probed's v0.34 types that way, and vanished on the way into the
// annotation; the v0.37 types it builds with now have them); a
// case-insensitive decode takes a misspelt field the API server ignores.
// Either way the probe probed would run is not the kubelet's, so adoption
// leaves it alone.
//
// Paths are dotted JSON field names within the probe ("httpGet.h2c",
// "httpHeaders[0].vaule"). A spec that is not a JSON object, or a probe that
// does not decode at all, yields nothing: the typed decode fails too, and
// the caller reports that.
func ProbeFieldsNotKept(rawSpec []byte) map[string][]string {
	var spec struct {
		InitContainers []map[string]json.RawMessage `json:"initContainers"`
		Containers     []map[string]json.RawMessage `json:"containers"`
	}
	if err := json.Unmarshal(rawSpec, &spec); err != nil {
		return nil
	}
	out := map[string][]string{}
	for _, list := range [][]map[string]json.RawMessage{spec.InitContainers, spec.Containers} {
		for _, c := range list {
			var name string
			if err := json.Unmarshal(c["name"], &name); err != nil {
				continue
			}
			for _, pt := range probeTypes {
				raw, ok := c[pt.field]
				if !ok {
					continue
				}
				if fields := probeFieldsNotKept(raw); len(fields) > 0 {
					out[name+"/"+pt.field] = fields
				}
			}
		}
	}
	return out
}

// probeFieldsNotKept compares one probe as written with its typed round
// trip, as the webhook decodes pods (encoding/json: case-insensitive,
// unknown fields dropped).
func probeFieldsNotKept(raw json.RawMessage) []string {
	before, err := decodeGeneric(raw)
	if err != nil || before == nil {
		return nil
	}
	var p v1.Probe
	if err := json.Unmarshal(raw, &p); err != nil {
		return nil
	}
	b, err := json.Marshal(&p)
	if err != nil {
		return nil
	}
	after, err := decodeGeneric(b)
	if err != nil {
		return nil
	}
	// A field the types know but drop because its value is empty
	// (omitempty) is kept in meaning; the strict decode tells those from
	// unknown fields with an empty value.
	unknown := map[string]bool{}
	if strict, err := kjson.UnmarshalStrict(raw, &v1.Probe{}); err == nil {
		for _, e := range strict {
			if fe, ok := e.(interface{ FieldPath() string }); ok {
				unknown[fe.FieldPath()] = true
			}
		}
	}
	var diffs []string
	diffJSON("", before, after, unknown, &diffs)
	sort.Strings(diffs)
	return diffs
}

func decodeGeneric(data []byte) (any, error) {
	d := json.NewDecoder(bytes.NewReader(data))
	d.UseNumber()
	var v any
	if err := d.Decode(&v); err != nil {
		return nil, err
	}
	return v, nil
}

// diffJSON appends the paths under which written differs from kept: a
// field dropped (unless its value is empty and the types know it), or a
// value changed.
func diffJSON(path string, written, kept any, unknown map[string]bool, out *[]string) {
	switch w := written.(type) {
	case map[string]any:
		k, ok := kept.(map[string]any)
		if !ok {
			*out = append(*out, pathOr(path))
			return
		}
		for name, wv := range w {
			p := joinPath(path, name)
			kv, present := k[name]
			switch {
			case present:
				diffJSON(p, wv, kv, unknown, out)
			case wv == nil:
				// null is absent.
			case isEmptyJSON(wv) && !unknown[p]:
				// A known field at its zero value, dropped by omitempty.
			default:
				*out = append(*out, p)
			}
		}
	case []any:
		k, ok := kept.([]any)
		if !ok {
			if len(w) == 0 && kept == nil {
				return
			}
			*out = append(*out, pathOr(path))
			return
		}
		if len(k) != len(w) {
			*out = append(*out, pathOr(path))
			return
		}
		for i := range w {
			diffJSON(path+"["+strconv.Itoa(i)+"]", w[i], k[i], unknown, out)
		}
	case json.Number:
		k, ok := kept.(json.Number)
		if !ok || !sameNumber(w, k) {
			*out = append(*out, pathOr(path))
		}
	default:
		if !reflect.DeepEqual(written, kept) {
			*out = append(*out, pathOr(path))
		}
	}
}

// sameNumber compares two JSON numbers by value: 1e1 and 10 are the same.
func sameNumber(a, b json.Number) bool {
	if a == b {
		return true
	}
	fa, errA := a.Float64()
	fb, errB := b.Float64()
	return errA == nil && errB == nil && fa == fb
}

func isEmptyJSON(v any) bool {
	switch t := v.(type) {
	case nil:
		return true
	case string:
		return t == ""
	case bool:
		return !t
	case json.Number:
		f, err := t.Float64()
		return err == nil && f == 0
	case []any:
		return len(t) == 0
	case map[string]any:
		return len(t) == 0
	}
	return false
}

func joinPath(path, name string) string {
	if path == "" {
		return name
	}
	return path + "." + name
}

func pathOr(path string) string {
	if path == "" {
		return "(the probe)"
	}
	return path
}
