package docs

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/probed-dev/probed/internal/docgen"
	"github.com/probed-dev/probed/test/harness/repo"
)

// The README is a front page: what probed is, then Install (the images
// first: nothing in it applies a manifest before saying where the images
// come from), Adopt, and the demo and test commands, before any
// reference. The test command is the one CI runs (.ci/run), and both are
// Makefile targets. The reference tables live in docs/ (flags.md,
// observability.md), generated from the code; the README holds none.
func TestReadmeFrontPage(t *testing.T) {
	root, err := repo.Root()
	if err != nil {
		t.Fatal(err)
	}
	read := func(rel string) string {
		b, err := os.ReadFile(filepath.Join(root, rel))
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	readme := read("README.md")

	// The front sections, in order, before the first other one.
	var headings []string
	for _, m := range regexp.MustCompile(`(?m)^## (.+)$`).FindAllStringSubmatch(readme, -1) {
		headings = append(headings, m[1])
	}
	front := []string{"Install", "Adopt", "Try it, test it"}
	if len(headings) < len(front) || strings.Join(headings[:len(front)], "|") != strings.Join(front, "|") {
		t.Errorf("README.md's first sections are %q, want %q first", headings, front)
	}

	install, err := docgen.Section([]byte(readme), "## Install")
	if err != nil {
		t.Fatal(err)
	}
	blocks := fencedBlocks(install)
	if len(blocks) == 0 || !hasCommand(blocks[0], "make image") || !hasCommand(blocks[0], "make push REGISTRY=") {
		t.Errorf("README.md's Install does not start with the images (make image, make push REGISTRY=…): %q", blocks)
	}
	firstBlock := strings.Index(readme, "```")
	for _, deploy := range []string{"kubectl apply", "helm install", "helm upgrade"} {
		if i := strings.Index(readme, deploy); i >= 0 && i < firstBlock {
			t.Errorf("README.md names %q before it says where the images come from", deploy)
		}
	}

	// .ci/run's last command is CI's; the README gives it as written.
	var ci string
	for _, l := range strings.Split(read(".ci/run"), "\n") {
		if l = strings.TrimSpace(l); l != "" && !strings.HasPrefix(l, "#") {
			ci = l
		}
	}
	if ci != "make test" {
		t.Fatalf(".ci/run runs %q; this test and README.md's \"Try it, test it\" expect make test", ci)
	}
	try, err := docgen.Section([]byte(readme), "## Try it, test it")
	if err != nil {
		t.Fatal(err)
	}
	tryBlocks := strings.Join(fencedBlocks(try), "\n")
	makefile := read("Makefile")
	for _, cmd := range []string{"make demo", ci} {
		if !hasCommand(tryBlocks, cmd) {
			t.Errorf("README.md's \"Try it, test it\" has no command %q", cmd)
		}
		target := strings.TrimPrefix(cmd, "make ")
		if !regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(target) + `:`).MatchString(makefile) {
			t.Errorf("the Makefile has no target %q for README.md's %q", target, cmd)
		}
	}

	// No flag or metric table: they are docs/'s, generated.
	if m := regexp.MustCompile("(?m)^\\| `(--[a-z]|probed_|prober_)[^`]*` \\|.*$").FindString(readme); m != "" {
		t.Errorf("README.md holds a flag or metric table row (docs/flags.md and docs/observability.md have them): %s", m)
	}
}

// fencedBlocks are the bodies of the fenced code blocks of md, in order.
func fencedBlocks(md string) []string {
	var out []string
	var cur *strings.Builder
	for _, l := range strings.Split(md, "\n") {
		t := strings.TrimSpace(l)
		switch {
		case cur == nil && strings.HasPrefix(t, "```"):
			cur = &strings.Builder{}
		case cur != nil && t == "```":
			out = append(out, cur.String())
			cur = nil
		case cur != nil:
			cur.WriteString(l + "\n")
		}
	}
	return out
}

// hasCommand: a line of block runs cmd (its first words, as written).
func hasCommand(block, cmd string) bool {
	for _, l := range strings.Split(block, "\n") {
		l = strings.TrimSpace(l)
		if l == cmd || strings.HasPrefix(l, cmd+" ") || (strings.HasSuffix(cmd, "=") && strings.HasPrefix(l, cmd)) {
			return true
		}
	}
	return false
}
