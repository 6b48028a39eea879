package convert

import (
	"fmt"
	"strings"
	"unicode/utf8"

	yaml "go.yaml.in/yaml/v3"
)

// renderKey writes a mapping key plainly when YAML reads it back as the
// same string, double-quoted otherwise.
func renderKey(k string) string {
	if reads(k+": x", k, "x") {
		return k
	}
	return doubleQuoted(k)
}

// renderScalar writes value for "key:<first>" followed by the lines rest,
// whose content is indented by indent: plain if YAML reads it back as the
// same string, a literal block (|-) if it has line breaks, else quoted.
// Every form but the double-quoted one, which always reads back, is checked
// by reading it back.
func renderScalar(value string, indent int) (first string, rest []string) {
	if !strings.Contains(value, "\n") {
		if value != "" && reads("k: "+value, "k", value) {
			return " " + value, nil
		}
		q := "'" + strings.ReplaceAll(value, "'", "''") + "'"
		if reads("k: "+q, "k", value) {
			return " " + q, nil
		}
	} else if !strings.HasPrefix(value, " ") {
		chomp := "-"
		body := value
		if strings.HasSuffix(value, "\n") {
			chomp, body = "", strings.TrimSuffix(value, "\n")
			if strings.HasSuffix(body, "\n") {
				chomp, body = "+", value
			}
		}
		lines := strings.Split(body, "\n")
		if chomp == "+" {
			lines = lines[:len(lines)-1]
		}
		for i, ln := range lines {
			if ln != "" {
				lines[i] = pad(indent) + ln
			}
		}
		if reads("k: |"+chomp+"\n"+strings.Join(lines, "\n")+"\n", "k", value) {
			return " |" + chomp, lines
		}
	}
	return " " + doubleQuoted(value), nil
}

// doubleQuoted writes s as a YAML double-quoted scalar, with escapes for
// what YAML does not allow or would read otherwise inside one: control
// characters (JSON leaves DEL and C1 as they are), line breaks (NEL, LS and
// PS too), a byte order mark, surrogates and non-characters.
func doubleQuoted(s string) string {
	var b strings.Builder
	b.WriteByte('"')
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			// Never: values come from YAML or JSON, both UTF-8.
			b.WriteString("\\uFFFD")
		case r == '"' || r == '\\':
			b.WriteByte('\\')
			b.WriteRune(r)
		case r == '\n':
			b.WriteString("\\n")
		case r == '\t':
			b.WriteString("\\t")
		case r == ' ' || (r > ' ' && r < 0x7F):
			b.WriteRune(r)
		case r < 0xA0:
			fmt.Fprintf(&b, "\\x%02X", r)
		case r == 0x2028 || r == 0x2029 || r == 0xFEFF || (r >= 0xD800 && r <= 0xDFFF) || r == 0xFFFE || r == 0xFFFF:
			fmt.Fprintf(&b, "\\u%04X", r)
		default:
			b.WriteRune(r)
		}
		i += size
	}
	b.WriteByte('"')
	return b.String()
}

// reads reports whether doc is a one-entry mapping of key to the string
// value.
func reads(doc, key, value string) bool {
	var n yaml.Node
	if err := yaml.Unmarshal([]byte(doc), &n); err != nil || len(n.Content) != 1 {
		return false
	}
	m := n.Content[0]
	if m.Kind != yaml.MappingNode || len(m.Content) != 2 {
		return false
	}
	k, v := m.Content[0], m.Content[1]
	return k.Kind == yaml.ScalarNode && k.Value == key && k.ShortTag() == "!!str" &&
		v.Kind == yaml.ScalarNode && v.Value == value && v.ShortTag() == "!!str"
}
