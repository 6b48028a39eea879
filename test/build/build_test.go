// Package build checks the repository's build scripts: that `make build`
// builds every command, and that every version a build is stamped with
// (hack/version.sh) is a semantic version, as krew, Helm and image tags
// need it.
package build

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/util/version"
	"sigs.k8s.io/yaml"
)

// semver is semver.org's own regular expression, with the leading v.
var semver = regexp.MustCompile(`^v(0|[1-9]\d*)\.(0|[1-9]\d*)\.(0|[1-9]\d*)(?:-((?:0|[1-9]\d*|\d*[a-zA-Z-][0-9a-zA-Z-]*)(?:\.(?:0|[1-9]\d*|\d*[a-zA-Z-][0-9a-zA-Z-]*))*))?(?:\+([0-9a-zA-Z-]+(?:\.[0-9a-zA-Z-]+)*))?$`)

func run(t *testing.T, dir string, name string, args ...string) string {
	t.Helper()
	cmd := exec.Command(name, args...)
	cmd.Dir = dir
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
	}
	return strings.TrimSpace(string(out))
}

// `make build` builds every command of cmd/ into bin/.
func TestMakeBuildBuildsEveryCommand(t *testing.T) {
	plan := run(t, "../..", "make", "-n", "build")
	cmds, err := filepath.Glob("../../cmd/*/main.go")
	if err != nil || len(cmds) < 3 {
		t.Fatalf("commands: %v %v", cmds, err)
	}
	for _, c := range cmds {
		name := filepath.Base(filepath.Dir(c))
		if !strings.Contains(plan, "./cmd/...") && !strings.Contains(plan, "./cmd/"+name) {
			t.Errorf("make build does not build cmd/%s:\n%s", name, plan)
		}
	}
	if !strings.Contains(plan, "-o bin/") {
		t.Errorf("make build does not write bin/:\n%s", plan)
	}
}

// hack/version.sh in a repository of its own: between releases
// v<VERSION>-dev.<commits since VERSION changed>.g<commit>, ordered, with
// .dirty for local changes; at a release tag, the tag. Every one is a
// semantic version that Kubernetes' (and krew's) parser takes.
func TestVersionScheme(t *testing.T) {
	dir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, "hack"), 0o755); err != nil {
		t.Fatal(err)
	}
	script, err := os.ReadFile("../../hack/version.sh")
	if err != nil {
		t.Fatal(err)
	}
	write := func(name, content string) {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	write("hack/version.sh", string(script))
	write("VERSION", "0.3.0\n")
	git := func(args ...string) string {
		return run(t, dir, "git", append([]string{"-c", "user.name=t", "-c", "user.email=t@example.com", "-c", "commit.gpgsign=false", "-c", "tag.gpgsign=false"}, args...)...)
	}
	version := func() string { return run(t, dir, "bash", "hack/version.sh") }
	git("init", "-q")
	git("add", ".")
	git("commit", "-qm", "start 0.3.0")
	var seen []string
	check := func(want string) {
		t.Helper()
		v := version()
		if !regexp.MustCompile(want).MatchString(v) {
			t.Errorf("version %q, want %s", v, want)
		}
		if !semver.MatchString(v) {
			t.Errorf("version %q is not a semantic version", v)
		}
		if _, err := versionParse(v); err != nil {
			t.Errorf("version %q: %v", v, err)
		}
		seen = append(seen, v)
	}
	check(`^v0\.3\.0-dev\.0\.g[0-9a-f]{7}$`)
	write("README", "x")
	git("add", "README")
	git("commit", "-qm", "more")
	check(`^v0\.3\.0-dev\.1\.g[0-9a-f]{7}$`)
	write("README", "y")
	check(`^v0\.3\.0-dev\.1\.g[0-9a-f]{7}\.dirty$`)
	git("commit", "-qam", "more")
	git("tag", "v0.3.0")
	check(`^v0\.3\.0$`)
	// The next cycle.
	write("VERSION", "0.4.0\n")
	git("commit", "-qam", "start 0.4.0")
	check(`^v0\.4\.0-dev\.0\.g[0-9a-f]{7}$`)

	// In order: dev.0 < dev.1 < v0.3.0 < v0.4.0-dev.0.
	order := []string{seen[0], seen[1], seen[3], seen[4]}
	for i := 1; i < len(order); i++ {
		a, _ := versionParse(order[i-1])
		b, _ := versionParse(order[i])
		if c, err := a.Compare(b.String()); err != nil || c >= 0 {
			t.Errorf("%s does not sort before %s", order[i-1], order[i])
		}
	}

	write("VERSION", "1.0\n")
	if out, err := exec.Command("bash", filepath.Join(dir, "hack/version.sh")).CombinedOutput(); err == nil {
		t.Errorf("VERSION 1.0 accepted: %s", out)
	}
}

func versionParse(v string) (*version.Version, error) { return version.ParseSemantic(v) }

// This checkout's version is a semantic version, and the chart's version
// is VERSION's.
func TestThisCheckoutsVersion(t *testing.T) {
	v := run(t, "../..", "bash", "hack/version.sh")
	if !semver.MatchString(v) {
		t.Errorf("hack/version.sh says %q: not a semantic version", v)
	}
	base, err := os.ReadFile("../../VERSION")
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile("../../charts/probed/Chart.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var chart struct {
		Version string `json:"version"`
	}
	if err := yaml.Unmarshal(b, &chart); err != nil {
		t.Fatal(err)
	}
	if chart.Version != strings.TrimSpace(string(base)) {
		t.Errorf("charts/probed/Chart.yaml version %q, VERSION %q: keep them equal", chart.Version, strings.TrimSpace(string(base)))
	}
	if !strings.HasPrefix(v, "v"+strings.TrimSpace(string(base))) {
		t.Errorf("hack/version.sh says %q, VERSION %q", v, base)
	}
}
