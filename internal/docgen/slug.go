package docgen

import (
	"strconv"
	"strings"
	"unicode"
)

// Slug is the anchor GitHub gives a Markdown heading whose text (as
// rendered: code spans' text, no markup) is text: lower case, every
// character but letters, digits, "-" and "_" dropped, spaces made "-".
// A second heading with the same slug gets "-1", a third "-2" (Slugger).
func Slug(text string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(text) {
		switch {
		case unicode.IsLetter(r), unicode.IsDigit(r), unicode.Is(unicode.Mn, r), r == '-', r == '_':
			b.WriteRune(r)
		case r == ' ':
			b.WriteRune('-')
		}
	}
	return b.String()
}

// Slugger gives one document's headings their anchors, as GitHub numbers
// repeated ones.
type Slugger map[string]int

// Slug returns the anchor of the next heading with text.
func (s Slugger) Slug(text string) string {
	base := Slug(text)
	n, seen := s[base]
	s[base] = n + 1
	if !seen {
		return base
	}
	return base + "-" + strconv.Itoa(n)
}
