package convert

import (
	yaml "go.yaml.in/yaml/v3"
)

// encodable readies nodes for yaml.v3's encoder, where it would write
// something that reads back otherwise: an empty null in a flow collection
// ({a} or {a: }) or as a key would come out as ”, an empty string.
func encodable(n *yaml.Node, inFlow bool) {
	inFlow = inFlow || flow(n)
	for i, c := range n.Content {
		key := n.Kind == yaml.MappingNode && i%2 == 0
		if (inFlow || key) && c.Kind == yaml.ScalarNode && c.ShortTag() == "!!null" && c.Value == "" {
			c.Value = "null"
		}
		encodable(c, inFlow)
	}
}
