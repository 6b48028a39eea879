package convert

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
)

// Inputs the fuzz targets found, each once mishandled: every one converts
// (no error, no panic), keeps the other documents byte for byte, leaves
// templates the daemon accepts, converts again to itself, and meets its
// own expectations.
func TestFuzzFindings(t *testing.T) {
	const probe = "    readinessProbe: {exec: {command: [x]}}\n"
	for _, c := range []struct {
		name, src string
		// reemitted: the document had to be encoded anew.
		reemitted bool
		// contains are texts the output must have.
		contains []string
		// skipped: the template is left alone.
		skipped bool
	}{{
		// Was: a panic (a nil map) planning the gate for a null spec.
		name:    "null spec, annotation declaring a gating probe",
		src:     "kind: Pod\nmetadata:\n  annotations:\n   probed.io/probes: '{\"\":{\"readinessProbe\":{}}}'\nspec:",
		skipped: true,
	}, {
		// Was: "internal error". A quote inside a plain scalar opened a
		// string to the bracket scan, and the encoder, the fallback, wrote
		// the empty nulls of the flow mapping as ''.
		name:     "quote in a plain scalar, empty nulls in flow",
		src:      "A: 0\nkind: Pod\nmetadata:\n A: 0\nspec:\n containers:\n - {A\"00,A000,name: c,livenessProbe: {exec: {command: [x]}}}",
		contains: []string{" - A\"00:\n   A000:\n   name: c"},
	}, {
		name:     "quote in a plain scalar of a flow document",
		src:      "{kind: Pod, metadata: {name: it's}, spec: {containers: [{name: a, image: \"it's\", readinessProbe: {exec: {command: [x]}}}]}}\n",
		contains: []string{`"name": "it's"`, `"image": "it's"`},
	}, {
		// The quoted scalars are found before the edits: the removed
		// probe's quoted key, with its bracket, still counts as one.
		// (Found with a bracket in a quoted key of the probe; a key the
		// types do not know now keeps the probe with the kubelet, so the
		// bracket is in a quoted string of it here.)
		name:     "bracket in a quoted string of a removed probe",
		src:      "{\"kind\": \"Pod\", \"spec\": {\"containers\": [{\"name\": \"a\", \"readinessProbe\": {\"exec\": {\"command\": [\"x}\"]}}}]}}\n",
		contains: []string{`"readinessGates": [`},
	}, {
		// Was: "internal error": the encoder, the fallback for the tagged
		// key, wrote the flow mapping's empty null as ''.
		name:      "re-emitted document with empty nulls in flow",
		src:       "kind: Pod\nmetadata: {labels: {a: }, name: p}\nspec:\n  !!str readinessGates: []\n  containers:\n  - name: c\n" + probe,
		reemitted: true,
		contains:  []string{"a: null"},
	}, {
		// Was: a panic, index out of range (or "internal error"), for
		// these four. YAML ends a line at a lone CR, as at NEL, LS and
		// PS: yaml.v3's line numbers counted them, the text editor did
		// not.
		name: "lone CR",
		src:  "apiVersion: v1\r\rkind: Pod\r\nmetadata:\r\n  name: crlf\r\nspec:\r\n  containers:\r\n  - name: app\r\n    image: app\r\n    readinessProbe:\r\n      tcpSocket: {port: 80}\r\n",
	}, {
		name:     "lone CR line endings",
		src:      "kind: Pod\rmetadata:\r  name: cr\rspec:\r  containers:\r  - name: c\r" + strings.ReplaceAll(probe, "\n", "\r"),
		contains: []string{"\r  annotations:\r    probed.io/probes: |-\r"},
	}, {
		name: "lone CR in a flow mapping",
		src:  "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  labels: {app\r web}\nspec:\n  template:\n    spec:\n      containers:\n      - name: c\n    " + probe,
	}, {
		name:     "line and paragraph separators, next line",
		src:      "kind: Pod\u2028metadata: {name: p}\u2029spec:\u0085  containers:\n  - name: c\n" + probe,
		contains: []string{"  annotations:\n    probed.io/probes: |-\n"},
	}, {
		// Was: re-emitted, the layout lost: yaml.v3 skips the mark
		// without counting a column, the editor counted it.
		name:     "byte order mark",
		src:      "\ufeffspec:\n  containers:\n  - name: c\n" + probe + "kind: Pod\n",
		contains: []string{"\ufeffmetadata:\n  annotations:\n"},
	}, {
		// Was: re-emitted, the whole layout lost: JSON leaves DEL as it
		// is, and the annotation's value, double-quoted as JSON, was not
		// YAML.
		name:     "DEL in a probe's command",
		src:      "kind: Pod\nspec:\n  containers:\n  - name: c\n    readinessProbe: {exec: {command: [\"\\x7F\"]}}\n",
		contains: []string{`probed.io/probes: "{\n`, `\"\x7F\"`},
	}} {
		t.Run(c.name, func(t *testing.T) {
			res, err := Convert([]byte(c.src))
			if err != nil {
				t.Fatalf("%v\n%q", err, c.src)
			}
			if len(res.Objects) != 1 || (res.Objects[0].Skipped != "") != c.skipped {
				t.Fatalf("objects %+v, want one, skipped %v", res.Objects, c.skipped)
			}
			if !c.skipped && !res.Changed() {
				t.Errorf("not converted:\n%q", res.Output)
			}
			if got := len(res.Reemitted) > 0; got != c.reemitted {
				t.Errorf("re-emitted %v, want %v:\n%s", res.Reemitted, c.reemitted, res.Output)
			}
			for _, s := range c.contains {
				if !bytes.Contains(res.Output, []byte(s)) {
					t.Errorf("output lacks %q:\n%q", s, res.Output)
				}
			}
			unchangedDocumentsIdentical(t, []byte(c.src), res)
			templatesAdopted(t, res.Output)
			again, err := Convert(res.Output)
			if err != nil || again.Changed() || !bytes.Equal(again.Output, res.Output) {
				t.Errorf("converting again (%v):\n%q\n%q", err, res.Output, again.Output)
			}
		})
	}
}

// A trailing block scalar that keeps its line breaks (|+) takes in the
// blank lines after it: converting keeps that meaning. (FuzzConvert once
// put a blank line after such a scalar and took the change for the
// converter's.)
func TestKeptLineBreaksAtDocumentEnd(t *testing.T) {
	src := "kind: Pod\nspec:\n  containers:\n  - name: c\n    startupProbe:\n      exec:\n        command:\n        - |+\n\n\n---\nkind: Service\n"
	res, err := Convert([]byte(src))
	if err != nil {
		t.Fatal(err)
	}
	tmpl := decodeTemplate(t, splitStream(res.Output)[0].src, res.Objects[0])
	var probes map[string]map[string]struct{ Exec struct{ Command []string } }
	if err := json.Unmarshal([]byte(tmpl.Annotations["probed.io/probes"]), &probes); err != nil {
		t.Fatal(err)
	}
	if got := probes["c"]["startupProbe"].Exec.Command; len(got) != 1 || got[0] != "\n\n" {
		t.Errorf("command %q, want [\"\\n\\n\"]:\n%s", got, res.Output)
	}
}

// Whatever renderScalar writes reads back as the same string, characters
// YAML must escape included.
func TestRenderScalarReadsBack(t *testing.T) {
	values := []string{"", " ", "x", "a\nb", "\na", "a\n", "a\n\n", " a\nb", "\t", "a\tb\n", "\"\\'", "#", "- x", "null", "1", "{a: b}",
		"\x00", "\x1b[0m", "\x7f", "\u0085", "\u0080\u009f", "\u2028", "\u2029", "\ufeff", "\ufffe", "\uffff", "\U0001F600", "a\r\nb", "\r"}
	for _, v := range values {
		for _, indent := range []int{0, 2} {
			first, rest := renderScalar(v, indent)
			doc := "k:" + first + "\n" + strings.Join(rest, "\n") + "\n"
			if !reads(doc, "k", v) {
				t.Errorf("%q is written as %q", v, doc)
			}
		}
		if k := renderKey(v); v != "" && !reads(k+": x", v, "x") {
			t.Errorf("key %q is written as %q", v, k)
		}
	}
}
