// Package manifest decodes the YAML the tests apply or inspect (deploy/,
// a chart's rendering, probed convert's output): a multi-document stream
// into typed or unstructured objects, and deploy/'s access objects into the
// API server.
package manifest

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/yaml"
)

// Documents splits a multi-document YAML stream, leaving out the documents
// with nothing but blanks and comments (Helm renders those).
func Documents(b []byte) ([][]byte, error) {
	r := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(b)))
	var out [][]byte
	for {
		doc, err := r.Read()
		if errors.Is(err, io.EOF) {
			return out, nil
		}
		if err != nil {
			return nil, err
		}
		if !blank(doc) {
			out = append(out, doc)
		}
	}
}

// blank reports whether a YAML document has only blank and comment lines.
func blank(doc []byte) bool {
	for _, line := range bytes.Split(doc, []byte("\n")) {
		if l := bytes.TrimSpace(line); len(l) > 0 && l[0] != '#' {
			return false
		}
	}
	return true
}

// Typed decodes a multi-document YAML stream into client-go's types.
func Typed(b []byte) ([]runtime.Object, error) {
	docs, err := Documents(b)
	if err != nil {
		return nil, err
	}
	out := make([]runtime.Object, 0, len(docs))
	for _, doc := range docs {
		obj, _, err := scheme.Codecs.UniversalDeserializer().Decode(doc, nil, nil)
		if err != nil {
			return nil, err
		}
		out = append(out, obj)
	}
	return out, nil
}

// Unstructured decodes a stream of YAML or JSON documents into maps, any
// kind, leaving out the empty ones.
func Unstructured(b []byte) ([]*unstructured.Unstructured, error) {
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(b), 4096)
	var out []*unstructured.Unstructured
	for {
		var m map[string]any
		if err := dec.Decode(&m); err != nil {
			if errors.Is(err, io.EOF) {
				return out, nil
			}
			return nil, err
		}
		if len(m) > 0 {
			out = append(out, &unstructured.Unstructured{Object: m})
		}
	}
}

// TypedFiles decodes the files with Typed, in order; an error names its file.
func TypedFiles(paths ...string) ([]runtime.Object, error) {
	return decodeFiles(Typed, paths)
}

// UnstructuredFiles decodes the files with Unstructured, in order; an error
// names its file.
func UnstructuredFiles(paths ...string) ([]*unstructured.Unstructured, error) {
	return decodeFiles(Unstructured, paths)
}

func decodeFiles[T any](decode func([]byte) ([]T, error), paths []string) ([]T, error) {
	var out []T
	for _, p := range paths {
		b, err := os.ReadFile(p)
		if err != nil {
			return nil, err
		}
		objs, err := decode(b)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", p, err)
		}
		out = append(out, objs...)
	}
	return out, nil
}

// Resources lists the files dir/kustomization.yaml names as resources, in
// its order, as paths under dir.
func Resources(dir string) ([]string, error) {
	b, err := os.ReadFile(filepath.Join(dir, "kustomization.yaml"))
	if err != nil {
		return nil, err
	}
	var k struct {
		Resources []string `json:"resources"`
	}
	if err := yaml.Unmarshal(b, &k); err != nil {
		return nil, fmt.Errorf("%s/kustomization.yaml: %w", dir, err)
	}
	paths := make([]string, len(k.Resources))
	for i, r := range k.Resources {
		paths[i] = filepath.Join(dir, r)
	}
	return paths, nil
}
