package convert

import yaml "go.yaml.in/yaml/v3"

type yamlNode = yaml.Node

func unmarshalNode(b []byte, n *yaml.Node) error { return yaml.Unmarshal(b, n) }
