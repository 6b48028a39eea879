package convert

import "bytes"

// segment is one document of a YAML stream as it was written: from its
// "---" line (if it has one) to the next "---" line. Concatenating the
// segments gives the stream back.
type segment struct {
	// index is the document's 1-based position in the stream.
	index int
	// line is the 1-based line of the stream where the segment starts.
	line int
	src  []byte
}

// splitStream cuts a YAML stream before every document-start marker. A line
// that starts with "---" followed by a space, a tab or the line's end is a
// marker wherever it appears: YAML forbids one inside a document's content,
// block scalars included, so no parse is needed to find them. Lines end
// where yaml.v3 sees a line break (see layout).
func splitStream(src []byte) []segment {
	var out []segment
	start, startLine, line := 0, 1, 1
	for off := 0; off < len(src); line++ {
		next := off
		for next < len(src) && lineBreak(src, next) == 0 {
			next++
		}
		if next < len(src) {
			next += lineBreak(src, next)
		}
		if off > start && isMarker(src[off:next]) {
			out = append(out, segment{index: len(out) + 1, line: startLine, src: src[start:off]})
			start, startLine = off, line
		}
		off = next
	}
	return append(out, segment{index: len(out) + 1, line: startLine, src: src[start:]})
}

func isMarker(line []byte) bool {
	if !bytes.HasPrefix(line, []byte("---")) {
		return false
	}
	return len(line) == 3 || line[3] == ' ' || line[3] == '\t' || lineBreak(line, 3) > 0
}

// Concat joins converted YAML streams into one, in order: a stream that does
// not start with a document marker gets one, after a line break, so that its
// first document does not run on from the previous stream's last.
func Concat(streams [][]byte) []byte {
	var out bytes.Buffer
	for _, s := range streams {
		if out.Len() > 0 {
			if !bytes.HasSuffix(out.Bytes(), []byte("\n")) {
				out.WriteString("\n")
			}
			if first, _, _ := bytes.Cut(s, []byte("\n")); !isMarker(append(first, '\n')) {
				out.WriteString("---\n")
			}
		}
		out.Write(s)
	}
	return out.Bytes()
}
