package convert

import (
	"encoding/json"
	"strings"

	yaml "go.yaml.in/yaml/v3"
)

// renderKey writes a mapping key plainly when YAML reads it back as the
// same string, double-quoted otherwise.
func renderKey(k string) string {
	if reads(k+": x", k, "x") {
		return k
	}
	b, _ := json.Marshal(k)
	return string(b)
}

// renderScalar writes value for "key:<first>" followed by the lines rest,
// whose content is indented by indent: plain if YAML reads it back as the
// same string, a literal block (|-) if it has line breaks, else quoted.
// Every form is checked by reading it back.
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
	b, _ := json.Marshal(value)
	return " " + string(b), nil
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
