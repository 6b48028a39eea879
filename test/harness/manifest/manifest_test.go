package manifest

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
)

const stream = `# Source: a chart's comment-only document
---
apiVersion: v1
kind: Namespace
metadata: {name: a}
---

---
apiVersion: v1
kind: ServiceAccount
metadata: {name: b, namespace: a}
`

func TestTypedLeavesOutEmptyDocuments(t *testing.T) {
	objs, err := Typed([]byte(stream))
	if err != nil {
		t.Fatal(err)
	}
	if len(objs) != 2 {
		t.Fatalf("%d objects, want 2", len(objs))
	}
	if ns, ok := objs[0].(*v1.Namespace); !ok || ns.Name != "a" {
		t.Errorf("first object %#v, want the Namespace a", objs[0])
	}
	if sa, ok := objs[1].(*v1.ServiceAccount); !ok || sa.Namespace != "a" {
		t.Errorf("second object %#v, want the ServiceAccount a/b", objs[1])
	}
}

func TestUnstructuredReadsYAMLAndJSON(t *testing.T) {
	for name, in := range map[string]string{
		"yaml": stream,
		"json": `{"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "a"}}
{"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "b", "namespace": "a"}}`,
	} {
		objs, err := Unstructured([]byte(in))
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if len(objs) != 2 || objs[0].GetKind() != "Namespace" || objs[1].GetName() != "b" {
			t.Errorf("%s: %d objects %v, want the Namespace and the ServiceAccount", name, len(objs), objs)
		}
	}
}

func TestTypedFilesNamesTheFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "bad.yaml")
	if err := os.WriteFile(path, []byte("apiVersion: v1\nkind: NoSuchKind\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := TypedFiles(path); err == nil || !strings.Contains(err.Error(), path) {
		t.Errorf("error %v, want one naming %s", err, path)
	}
}
