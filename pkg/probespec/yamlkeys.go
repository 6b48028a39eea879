package probespec

import (
	"fmt"
	"sort"
	"strconv"
	"strings"

	yamlv2 "go.yaml.in/yaml/v2"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// yamlKeyCollision finds two keys of one YAML mapping that the converter
// (sigs.k8s.io/yaml) turns into the same JSON key, such as 1 and "1", or
// true and "true". The converter keeps whichever it meets last in Go's
// random map order, so such an annotation would mean different probes from
// one read to the next. It decodes as the converter does (YAML 1.1 through
// go.yaml.in/yaml/v2) and is only called on text the converter accepted.
func yamlKeyCollision(text string) error {
	var doc any
	if err := yamlv2.Unmarshal([]byte(text), &doc); err != nil {
		return err
	}
	return keyCollision(nil, doc)
}

func keyCollision(path *field.Path, v any) error {
	switch t := v.(type) {
	case map[any]any:
		written := map[string][]string{}
		keys := make([]string, 0, len(t))
		children := map[string]any{}
		for k, child := range t {
			s, ok := jsonKey(k)
			if !ok {
				continue // the converter refused it already
			}
			if _, seen := written[s]; !seen {
				keys = append(keys, s)
			}
			written[s] = append(written[s], yamlKeyText(k))
			children[s] = child
		}
		sort.Strings(keys)
		for _, s := range keys {
			if w := written[s]; len(w) > 1 {
				sort.Strings(w)
				msg := fmt.Sprintf("YAML keys %s read as the same key %q", strings.Join(w, ", "), s)
				if path != nil {
					msg = path.String() + ": " + msg
				}
				return fmt.Errorf("%s", msg)
			}
		}
		for _, s := range keys {
			if err := keyCollision(childPath(path, s), children[s]); err != nil {
				return err
			}
		}
	case []any:
		for i, e := range t {
			if err := keyCollision(path.Index(i), e); err != nil {
				return err
			}
		}
	}
	return nil
}

func childPath(path *field.Path, key string) *field.Path {
	if path == nil {
		return field.NewPath(key)
	}
	return path.Child(key)
}

// jsonKey is the JSON key sigs.k8s.io/yaml makes of a decoded YAML key.
func jsonKey(k any) (string, bool) {
	switch t := k.(type) {
	case string:
		return t, true
	case int:
		return strconv.Itoa(t), true
	case int64:
		return strconv.FormatInt(t, 10), true
	case float64:
		switch s := strconv.FormatFloat(t, 'g', -1, 32); s {
		case "+Inf":
			return ".inf", true
		case "-Inf":
			return "-.inf", true
		case "NaN":
			return ".nan", true
		default:
			return s, true
		}
	case bool:
		return strconv.FormatBool(t), true
	}
	return "", false
}

// yamlKeyText shows a decoded key with its type: "1" is a string, 1 an
// integer, 1.0 a float.
func yamlKeyText(k any) string {
	switch t := k.(type) {
	case string:
		return strconv.Quote(t)
	case float64:
		s := strconv.FormatFloat(t, 'g', -1, 64)
		if !strings.ContainsAny(s, ".eIN") {
			s += ".0"
		}
		return s
	}
	return fmt.Sprint(k)
}
