package convert

import (
	"fmt"
	"slices"
	"strings"

	yaml "go.yaml.in/yaml/v3"
)

// where a kind keeps its pod template, and the API groups it is served by.
type templateKind struct {
	groups []string
	// path from the object to the template; empty for a Pod, whose own
	// metadata and spec are the template's.
	path []string
}

var kinds = map[string]templateKind{
	"Pod":                   {[]string{""}, nil},
	"PodTemplate":           {[]string{""}, []string{"template"}},
	"ReplicationController": {[]string{""}, []string{"spec", "template"}},
	"Deployment":            {[]string{"apps", "extensions"}, []string{"spec", "template"}},
	"StatefulSet":           {[]string{"apps"}, []string{"spec", "template"}},
	"DaemonSet":             {[]string{"apps", "extensions"}, []string{"spec", "template"}},
	"ReplicaSet":            {[]string{"apps", "extensions"}, []string{"spec", "template"}},
	"Job":                   {[]string{"batch"}, []string{"spec", "template"}},
	"CronJob":               {[]string{"batch"}, []string{"spec", "jobTemplate", "spec", "template"}},
}

// templatePaths are where an object of any other kind is looked at for a
// standard pod template (metadata and a pod spec with containers): an
// OpenKruise CloneSet or Advanced StatefulSet, an Argo Rollout, a custom
// workload that embeds a PodTemplateSpec as Deployment does.
var templatePaths = [][]string{{"spec", "template"}, {"spec", "jobTemplate", "spec", "template"}, {"template"}}

// skippedObject is an object of the stream that has no pod template.
type skippedObject struct {
	object string
	reason string
	line   int
}

// template is one pod template found in a document.
type template struct {
	// object names its object for messages, e.g. "Deployment shop/web" or
	// "List item 2: Deployment shop/web".
	object string
	// path leads from the document's root to the template, as map keys
	// (string) and list indices (int).
	path []any
	// node is the template's mapping (a Pod's own mapping for a Pod).
	node *yaml.Node
	// chain are the nodes from the root to node, for the anchor check.
	chain []*yaml.Node
}

// field is the path of the template inside its object, e.g. "spec.template".
func (t template) field() string {
	var b strings.Builder
	for _, p := range t.path {
		switch p := p.(type) {
		case string:
			if b.Len() > 0 {
				b.WriteByte('.')
			}
			b.WriteString(p)
		case int:
			fmt.Fprintf(&b, "[%d]", p)
		}
	}
	if b.Len() == 0 {
		return "the pod"
	}
	return b.String()
}

// findTemplates lists the pod templates of a document's root node.
func findTemplates(root *yaml.Node) []template {
	return templatesOf(root, nil, []*yaml.Node{root}, "", nil)
}

// scan lists the pod templates of a document's root node, and the objects
// in it that have none.
func scan(root *yaml.Node) ([]template, []skippedObject) {
	var skipped []skippedObject
	ts := templatesOf(root, nil, []*yaml.Node{root}, "", &skipped)
	return ts, skipped
}

func templatesOf(obj *yaml.Node, path []any, chain []*yaml.Node, prefix string, skipped *[]skippedObject) []template {
	if obj.Kind != yaml.MappingNode {
		return nil
	}
	kind, apiVersion := scalar(obj, "kind"), scalar(obj, "apiVersion")
	group := ""
	if i := strings.LastIndexByte(apiVersion, '/'); i >= 0 {
		group = apiVersion[:i]
	}
	if kind == "List" && group == "" {
		items := lookup(obj, "items")
		if items == nil || items.Kind != yaml.SequenceNode {
			return nil
		}
		var out []template
		for i, it := range items.Content {
			p := append(append(append([]any(nil), path...), "items"), i)
			c := append(append(append([]*yaml.Node(nil), chain...), items), it)
			out = append(out, templatesOf(it, p, c, fmt.Sprintf("%sList item %d: ", prefix, i+1), skipped)...)
		}
		return out
	}
	name := scalar(lookup(obj, "metadata"), "name")
	if ns := scalar(lookup(obj, "metadata"), "namespace"); ns != "" {
		name = ns + "/" + name
	}
	object := prefix + kind + " " + name
	if kind == "" {
		object = prefix + "an object without a kind"
	}
	skip := func(reason string) []template {
		if skipped != nil {
			*skipped = append(*skipped, skippedObject{object: object, reason: reason, line: obj.Line})
		}
		return nil
	}
	var paths [][]string
	if k, ok := kinds[kind]; ok && slices.Contains(k.groups, group) {
		paths = [][]string{k.path}
	} else {
		paths = templatePaths
	}
	for _, kp := range paths {
		node := obj
		p := append([]any(nil), path...)
		c := append([]*yaml.Node(nil), chain...)
		for _, key := range kp {
			node = lookup(node, key)
			if node == nil || node.Kind != yaml.MappingNode {
				break
			}
			p = append(p, key)
			c = append(c, node)
		}
		if node == nil || node.Kind != yaml.MappingNode || (len(paths) > 1 && !podTemplate(node)) {
			continue
		}
		return []template{{object: object, path: p, node: node, chain: c}}
	}
	if len(paths) == 1 {
		return skip("no pod template at " + strings.Join(paths[0], "."))
	}
	var where []string
	for _, kp := range paths {
		where = append(where, strings.Join(kp, "."))
	}
	return skip("no pod template (looked at " + strings.Join(where, ", ") + ")")
}

// podTemplate reports whether n looks like a PodTemplateSpec: a spec with
// a list of containers.
func podTemplate(n *yaml.Node) bool {
	spec := lookup(n, "spec")
	c := lookup(spec, "containers")
	return spec != nil && spec.Kind == yaml.MappingNode && c != nil && c.Kind == yaml.SequenceNode
}

// lookup is the value of key in mapping m, or nil.
func lookup(m *yaml.Node, key string) *yaml.Node {
	if i := keyIndex(m, key); i >= 0 {
		return m.Content[i+1]
	}
	return nil
}

// keyIndex is the index in m.Content of key's key node, or -1.
func keyIndex(m *yaml.Node, key string) int {
	if m == nil || m.Kind != yaml.MappingNode {
		return -1
	}
	for i := 0; i+1 < len(m.Content); i += 2 {
		if k := m.Content[i]; k.Kind == yaml.ScalarNode && k.Value == key {
			return i
		}
	}
	return -1
}

func scalar(m *yaml.Node, key string) string {
	if v := lookup(m, key); v != nil && v.Kind == yaml.ScalarNode {
		return v.Value
	}
	return ""
}
