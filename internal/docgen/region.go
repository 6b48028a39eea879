package docgen

import (
	"bytes"
	"fmt"
	"os"
	"strings"
)

// Region is one generated part of a Markdown file: Body goes between the
// lines "<!-- BEGIN GENERATED <Name>: ... -->" and "<!-- END GENERATED <Name> -->",
// which the file must hold once each, in that order.
type Region struct {
	Name string
	Body string
}

func beginMarker(name string) string { return "<!-- BEGIN GENERATED " + name + ":" }
func endMarker(name string) string   { return "<!-- END GENERATED " + name + " -->" }

// Replace returns doc with r's body between its markers. The begin marker's
// comment (what to run to regenerate) is kept as it is.
func Replace(doc []byte, r Region) ([]byte, error) {
	begin, end, err := bounds(doc, r.Name)
	if err != nil {
		return nil, err
	}
	body := strings.TrimSuffix(r.Body, "\n") + "\n"
	var out bytes.Buffer
	out.Write(doc[:begin])
	out.WriteString(body)
	out.Write(doc[end:])
	return out.Bytes(), nil
}

// Extract returns what doc holds between r's markers.
func Extract(doc []byte, name string) (string, error) {
	begin, end, err := bounds(doc, name)
	if err != nil {
		return "", err
	}
	return string(doc[begin:end]), nil
}

// bounds finds the body of the region name: from the line after its begin
// marker to the start of its end marker's line.
func bounds(doc []byte, name string) (int, int, error) {
	bm, em := []byte(beginMarker(name)), []byte(endMarker(name))
	if n := bytes.Count(doc, bm); n != 1 {
		return 0, 0, fmt.Errorf("%d lines %q…, want one", n, bm)
	}
	if n := bytes.Count(doc, em); n != 1 {
		return 0, 0, fmt.Errorf("%d lines %q, want one", n, em)
	}
	b := bytes.Index(doc, bm)
	if b > 0 && doc[b-1] != '\n' {
		return 0, 0, fmt.Errorf("%q does not start a line", bm)
	}
	nl := bytes.IndexByte(doc[b:], '\n')
	if nl < 0 {
		return 0, 0, fmt.Errorf("%q ends the file", bm)
	}
	begin := b + nl + 1
	end := bytes.Index(doc, em)
	if end < begin || doc[end-1] != '\n' {
		return 0, 0, fmt.Errorf("%q must start a line after %q", em, bm)
	}
	return begin, end, nil
}

// Sync compares the regions of the file at path with what they should
// hold and, with update, rewrites the file. Without update, an error names
// every region out of date, its first differing line, and cmd, the command
// that regenerates it.
func Sync(path string, update bool, cmd string, regions ...Region) error {
	doc, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	want := doc
	var stale []string
	for _, r := range regions {
		got, err := Extract(want, r.Name)
		if err != nil {
			return fmt.Errorf("%s: %w", path, err)
		}
		if want, err = Replace(want, r); err != nil {
			return fmt.Errorf("%s: %w", path, err)
		}
		if body := strings.TrimSuffix(r.Body, "\n") + "\n"; got != body {
			stale = append(stale, fmt.Sprintf("%s (first difference: %s)", r.Name, firstDiff(got, body)))
		}
	}
	if len(stale) == 0 {
		return nil
	}
	if update {
		return os.WriteFile(path, want, 0o644)
	}
	return fmt.Errorf("%s is out of date in %s; regenerate it:\n  %s", strings.Join(stale, ", "), path, cmd)
}

// firstDiff quotes the first line where got and want differ.
func firstDiff(got, want string) string {
	g, w := strings.Split(got, "\n"), strings.Split(want, "\n")
	for i := 0; i < len(g) || i < len(w); i++ {
		var gl, wl string
		if i < len(g) {
			gl = g[i]
		}
		if i < len(w) {
			wl = w[i]
		}
		if gl != wl {
			return fmt.Sprintf("line %d is %q, want %q", i+1, gl, wl)
		}
	}
	return "none"
}
