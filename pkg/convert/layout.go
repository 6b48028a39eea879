package convert

import (
	"bytes"
	"sort"
	"unicode/utf8"

	yaml "go.yaml.in/yaml/v3"
)

// layout answers questions about the lines of one segment's text, for the
// edits made at the positions yaml.v3 reports (1-based lines, and 1-based
// columns counted in characters). Lines end where yaml.v3 counts a line
// break: CR LF, LF, CR, NEL, LS or PS.
type layout struct {
	src []byte
	// starts[i] is the offset of line i+1, and ends[i] that of its line
	// break (or the end of the text).
	starts, ends []int
	// nl is the segment's line ending.
	nl string
	// bom is the length of a byte order mark opening the text: yaml.v3
	// skips it without counting a column.
	bom int
}

func newLayout(src []byte) *layout {
	l := &layout{src: src, starts: []int{0}, nl: "\n"}
	if bytes.HasPrefix(src, []byte(byteOrderMark)) {
		l.bom = len(byteOrderMark)
	}
	for i := 0; i < len(src); {
		w := lineBreak(src, i)
		if w == 0 {
			i++
			continue
		}
		if len(l.ends) == 0 && (w == 2 || src[i] == '\r') {
			l.nl = string(src[i : i+w]) // CR LF or CR; LF otherwise
		}
		l.ends = append(l.ends, i)
		if i += w; i < len(src) {
			l.starts = append(l.starts, i)
		}
	}
	if len(l.ends) < len(l.starts) {
		l.ends = append(l.ends, len(src))
	}
	return l
}

const byteOrderMark = "\ufeff"

// lineBreak is the length of the line break at src[i:], or 0.
func lineBreak(src []byte, i int) int {
	switch c := src[i]; {
	case c == '\n':
		return 1
	case c == '\r':
		if i+1 < len(src) && src[i+1] == '\n' {
			return 2
		}
		return 1
	case c == 0xC2: // NEL is C2 85
		if i+1 < len(src) && src[i+1] == 0x85 {
			return 2
		}
	case c == 0xE2: // LS and PS are E2 80 A8 and E2 80 A9
		if i+2 < len(src) && src[i+1] == 0x80 && (src[i+2] == 0xA8 || src[i+2] == 0xA9) {
			return 3
		}
	}
	return 0
}

// endsWithBreak reports whether src's last line is ended.
func endsWithBreak(src []byte) bool {
	for _, b := range []string{"\n", "\r", "\u0085", "\u2028", "\u2029"} {
		if bytes.HasSuffix(src, []byte(b)) {
			return true
		}
	}
	return false
}

// lineEnd is the offset of the first line break at or after i.
func lineEnd(src []byte, i int) int {
	for i < len(src) && lineBreak(src, i) == 0 {
		i++
	}
	return i
}

// space: a space, a tab or a line break at src[i].
func space(src []byte, i int) bool {
	return src[i] == ' ' || src[i] == '\t' || lineBreak(src, i) > 0
}

func (l *layout) lines() int { return len(l.starts) }

// start is the offset of line n's first character, after a byte order mark.
func (l *layout) start(n int) int {
	if n == 1 {
		return l.bom
	}
	return l.starts[n-1]
}

// text is line n without its line ending.
func (l *layout) text(n int) []byte { return l.src[l.start(n):l.ends[n-1]] }

// next is the offset just after line n's line ending.
func (l *layout) next(n int) int {
	if n < len(l.starts) {
		return l.starts[n]
	}
	return len(l.src)
}

// eol is the offset of line n's line ending (or the end of the text).
func (l *layout) eol(n int) int { return l.ends[n-1] }

// offset is the byte offset of a node's position.
func (l *layout) offset(n *yaml.Node) int {
	off := l.start(n.Line)
	for c := 1; c < n.Column && off < len(l.src); c++ {
		_, size := utf8.DecodeRune(l.src[off:])
		off += size
	}
	return off
}

// indent is line n's count of leading spaces, or -1 for a blank line.
func (l *layout) indent(n int) int {
	t := l.text(n)
	i := 0
	for i < len(t) && t[i] == ' ' {
		i++
	}
	if len(bytes.TrimSpace(t[i:])) == 0 {
		return -1
	}
	return i
}

func (l *layout) comment(n int) bool {
	t := bytes.TrimLeft(l.text(n), " ")
	return len(t) > 0 && t[0] == '#'
}

// seqEntry reports whether line n is a block sequence entry ("- x" or "-").
func (l *layout) seqEntry(n int) bool {
	t := bytes.TrimLeft(l.text(n), " ")
	return bytes.Equal(bytes.TrimRight(t, " \t"), []byte("-")) || bytes.HasPrefix(t, []byte("- "))
}

// startsLine reports whether only spaces precede node on its line.
func (l *layout) startsLine(n *yaml.Node) bool {
	return len(bytes.Trim(l.src[l.start(n.Line):l.offset(n)], " ")) == 0
}

// blockEnd is the last line of a block node that starts on line first and
// whose content is indented deeper than col (0-based): the lines after it
// that are more indented, comments and blank lines among them, and, for a
// block sequence written at its key's indentation, the "- " lines at col.
// Blank lines after the last such line are not part of it.
func (l *layout) blockEnd(first, col int, seqAtCol bool) int {
	last := first
	for n := first + 1; n <= l.lines(); n++ {
		ind := l.indent(n)
		switch {
		case ind < 0:
			continue
		case ind > col, seqAtCol && ind == col && (l.seqEntry(n) || l.comment(n)):
			last = n
			continue
		}
		break
	}
	return last
}

// entryEnd is the last line of the block mapping entry whose key is k.
func (l *layout) entryEnd(k, v *yaml.Node) int {
	return l.blockEnd(k.Line, k.Column-1, v.Kind == yaml.SequenceNode && v.Style&yaml.FlowStyle == 0)
}

// colonAfter is the offset of the ':' that ends the (single-line) key k.
func (l *layout) colonAfter(k *yaml.Node) (int, bool) {
	if k.Kind != yaml.ScalarNode {
		return 0, false
	}
	off := l.offset(k)
	switch {
	case k.Style&yaml.SingleQuotedStyle != 0:
		off = l.closingQuote(off, '\'')
	case k.Style&yaml.DoubleQuotedStyle != 0:
		off = l.closingQuote(off, '"')
	case k.Style == 0 || k.Style == yaml.TaggedStyle:
		off += len(k.Value)
	default:
		return 0, false
	}
	for off >= 0 && off < len(l.src) && (l.src[off] == ' ' || l.src[off] == '\t') {
		off++
	}
	if off < 0 || off >= len(l.src) || l.src[off] != ':' {
		return 0, false
	}
	return off, true
}

// closingQuote is the offset just past the quoted scalar opening at off, or
// -1 when it does not end on its line.
func (l *layout) closingQuote(off int, q byte) int {
	for i := off + 1; i < l.eol(l.lineOf(off)); i++ {
		switch {
		case q == '"' && l.src[i] == '\\':
			i++
		case l.src[i] == q && q == '\'' && i+1 < len(l.src) && l.src[i+1] == '\'':
			i++
		case l.src[i] == q:
			return i + 1
		}
	}
	return -1
}

// lineOf is the 1-based line of offset off.
func (l *layout) lineOf(off int) int {
	return sort.Search(len(l.starts), func(i int) bool { return l.starts[i] > off })
}
