// Package repo finds probed's repository root, for the tests and their
// harnesses, which run in their package's directory (as go test runs them).
package repo

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// Module is the path of probed's own module.
const Module = "github.com/probed-dev/probed"

// Root walks up from the working directory to the go.mod of Module. It
// matches the module path exactly: test/tools, test/bench and
// test/kubeletparity hold modules of their own whose paths extend it. The
// working directory, not a source file's compiled-in path, because -trimpath
// builds (as make test's) leave those relative.
func Root() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for start := dir; ; {
		if modulePath(filepath.Join(dir, "go.mod")) == Module {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", fmt.Errorf("no go.mod of %s above %s", Module, start)
		}
		dir = parent
	}
}

// modulePath returns the path on the "module" line of a go.mod, or "".
func modulePath(goMod string) string {
	b, err := os.ReadFile(goMod)
	if err != nil {
		return ""
	}
	for _, line := range strings.Split(string(b), "\n") {
		if f := strings.Fields(line); len(f) >= 2 && f[0] == "module" {
			return strings.Trim(f[1], `"`)
		}
	}
	return ""
}

// InstallWrapper is the kustomization docs/install.md tells users to write
// around deploy/ (its "# my-probed/kustomization.yaml" block), as written.
func InstallWrapper(root string) (string, error) {
	return DocBlock(root, "docs/install.md", "yaml", "# my-probed/kustomization.yaml")
}

// DocBlock is the fenced code block of the repository-relative Markdown
// file doc whose language is lang and whose first line is first, as
// written (first included).
func DocBlock(root, doc, lang, first string) (string, error) {
	b, err := os.ReadFile(filepath.Join(root, filepath.FromSlash(doc)))
	if err != nil {
		return "", err
	}
	start := "```" + lang + "\n" + first + "\n"
	_, rest, ok := strings.Cut(string(b), start)
	if !ok {
		return "", fmt.Errorf("%s has no %s block starting %q", doc, lang, first)
	}
	block, _, ok := strings.Cut(rest, "```")
	if !ok {
		return "", fmt.Errorf("%s: the block starting %q does not end", doc, first)
	}
	return first + "\n" + block, nil
}
