package repo

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestRootFromThisPackage(t *testing.T) {
	root, err := Root()
	if err != nil {
		t.Fatal(err)
	}
	if want, _ := filepath.Abs("../../.."); root != want {
		t.Fatalf("Root() = %s, want %s", root, want)
	}
}

// A nested module's directory is not the root: its path extends Module.
func TestRootSkipsNestedModules(t *testing.T) {
	want, _ := filepath.Abs("../../..")
	nested := filepath.Join(want, "test", "kubeletparity")
	b, err := os.ReadFile(filepath.Join(nested, "go.mod"))
	if err != nil || !strings.HasPrefix(modulePath(filepath.Join(nested, "go.mod")), Module+"/") {
		t.Fatalf("test/kubeletparity is no longer a nested module (%v): %.80s", err, b)
	}
	t.Chdir(nested)
	if root, err := Root(); err != nil || root != want {
		t.Fatalf("Root() from %s = %q, %v; want %s", nested, root, err, want)
	}
}

func TestRootOutsideTheRepository(t *testing.T) {
	t.Chdir(t.TempDir())
	if root, err := Root(); err == nil {
		t.Fatalf("Root() outside the repository = %s, want an error", root)
	}
}
