package docs

import (
	"strings"
	"testing"
)

// Parse finds what GitHub renders as links and headings, and nothing in
// code: a fenced block, an indented one or a code span.
func TestParse(t *testing.T) {
	src := "# Title\n\n## The `--flag` (default)\n\n## Notes\n\n## Notes\n\n" +
		"See [a](a.md#x) and ![img](i.svg), <https://example.com/a>,\n[ref][r] and `[not](code.md)`.\n\n" +
		"```md\n[not](fenced.md)\n## not a heading\n```\n\n    [not](indented.md)\n\n" +
		"| t | [cell](cell.md) |\n|---|---|\n\n[r]: ref.md#y\n"
	d := Parse("doc.md", []byte(src))
	var dests []string
	for _, l := range d.Links {
		dests = append(dests, l.Dest)
	}
	if got, want := strings.Join(dests, " "), "a.md#x i.svg https://example.com/a ref.md#y cell.md"; got != want {
		t.Errorf("links %q, want %q", got, want)
	}
	for _, a := range []string{"title", "the---flag-default", "notes", "notes-1"} {
		if !d.Anchors[a] {
			t.Errorf("no anchor #%s in %v", a, d.Anchors)
		}
	}
	if d.Anchors["not-a-heading"] {
		t.Error("a heading inside a code block got an anchor")
	}
	if d.Links[0].Line != 9 || d.Links[len(d.Links)-1].Line != 19 {
		t.Errorf("lines %d and %d, want 9 and 19", d.Links[0].Line, d.Links[len(d.Links)-1].Line)
	}
}
