package chartschema

import (
	"fmt"
	"reflect"
	"strconv"
	"strings"

	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// quantityPattern is a Kubernetes resource quantity (resource.Quantity).
const quantityPattern = `^[+-]?([0-9]+(\.[0-9]*)?|\.[0-9]+)(([KMGTPE]i)|[numkMGTPE]|([eE][+-]?[0-9]+))?$`

// builder turns Go types into JSON Schema. Kubernetes API types (k8s.io/...)
// go into definitions, once each, and are referenced; the chart's own are
// written in place. Every object refuses keys its Go type does not have.
type builder struct {
	defs map[string]any
}

var (
	quantityType = reflect.TypeOf(resource.Quantity{})
	intOrString  = reflect.TypeOf(intstr.IntOrString{})
	timeType     = reflect.TypeOf(metav1.Time{})
	durationType = reflect.TypeOf(metav1.Duration{})
)

func (b *builder) schema(t reflect.Type) map[string]any {
	switch t {
	case quantityType:
		return map[string]any{"anyOf": []any{
			map[string]any{"type": "string", "pattern": quantityPattern}, map[string]any{"type": "number"}}}
	case intOrString:
		return map[string]any{"anyOf": []any{map[string]any{"type": "integer"}, map[string]any{"type": "string"}}}
	case timeType, durationType:
		return map[string]any{"type": "string"}
	}
	switch t.Kind() {
	case reflect.Pointer:
		return b.schema(t.Elem())
	case reflect.String:
		return map[string]any{"type": "string"}
	case reflect.Bool:
		return map[string]any{"type": "boolean"}
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return map[string]any{"type": "integer"}
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return map[string]any{"type": "integer", "minimum": 0}
	case reflect.Float32, reflect.Float64:
		return map[string]any{"type": "number"}
	case reflect.Slice:
		if t.Elem().Kind() == reflect.Uint8 {
			return map[string]any{"type": "string"} // base64
		}
		return map[string]any{"type": "array", "items": b.schema(t.Elem())}
	case reflect.Map:
		return map[string]any{"type": "object", "additionalProperties": b.schema(t.Elem())}
	case reflect.Struct:
		if strings.HasPrefix(t.PkgPath(), "k8s.io/") {
			name := defName(t)
			if _, ok := b.defs[name]; !ok {
				b.defs[name] = nil // taken: a type that contains itself refers back
				b.defs[name] = b.object(t)
			}
			return map[string]any{"$ref": "#/definitions/" + name}
		}
		return b.object(t)
	case reflect.Interface:
		return map[string]any{}
	}
	panic(fmt.Sprintf("chartschema: no schema for %v", t))
}

// defName names a Kubernetes type as its OpenAPI does, e.g.
// io.k8s.api.core.v1.Volume.
func defName(t reflect.Type) string {
	p := strings.TrimPrefix(t.PkgPath(), "k8s.io/")
	parts := strings.Split(p, "/")
	if parts[0] == "api" {
		return "io.k8s.api." + strings.Join(parts[1:], ".") + "." + t.Name()
	}
	return "io.k8s." + strings.Join(parts, ".") + "." + t.Name()
}

// object is a struct's schema: its JSON fields (inlined ones flattened),
// with the constraints of their `schema` tags, and no other keys.
func (b *builder) object(t reflect.Type) map[string]any {
	props := map[string]any{}
	b.fields(t, props)
	return map[string]any{"type": "object", "properties": props, "additionalProperties": false}
}

func (b *builder) fields(t reflect.Type, props map[string]any) {
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		if !f.IsExported() {
			continue
		}
		name, opts, _ := strings.Cut(f.Tag.Get("json"), ",")
		if name == "-" {
			continue
		}
		if strings.Contains(opts, "inline") || (f.Anonymous && name == "") {
			ft := f.Type
			if ft.Kind() == reflect.Pointer {
				ft = ft.Elem()
			}
			b.fields(ft, props)
			continue
		}
		if name == "" {
			name = f.Name
		}
		s := b.schema(f.Type)
		if tag := f.Tag.Get("schema"); tag != "" {
			s = constrain(s, tag)
		}
		props[name] = s
	}
}

// constrain adds a field's `schema:"key=value;..."` constraints: enum
// (values separated by |), minimum, maximum, minLength, pattern, nullable.
func constrain(s map[string]any, tag string) map[string]any {
	c := make(map[string]any, len(s)+1)
	for k, v := range s {
		c[k] = v
	}
	for _, kv := range strings.Split(tag, ";") {
		k, v, _ := strings.Cut(kv, "=")
		switch k {
		case "enum":
			var e []any
			for _, x := range strings.Split(v, "|") {
				e = append(e, x)
			}
			c["enum"] = e
		case "minimum", "maximum", "minLength":
			n, err := strconv.Atoi(v)
			if err != nil {
				panic(fmt.Sprintf("chartschema: %s=%q", k, v))
			}
			c[k] = n
		case "pattern":
			c[k] = v
		default:
			panic(fmt.Sprintf("chartschema: unknown constraint %q", k))
		}
	}
	return c
}
