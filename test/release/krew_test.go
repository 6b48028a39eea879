//go:build release

package release

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"testing"
)

// The krew manifest make plugin-dist writes passes krew's own validation
// (validate-krew-manifest, as krew-index's CI runs it; built by
// hack/krew.sh), and krew installs the plugin from it and the archive of
// this platform, offline: the version is a semantic version, the checksums
// match, and the installed kubectl-probed says that version. The install
// is docs/kubectl-plugin.md's command, whose archive name must be the one
// the build wrote.
func TestKrewManifest(t *testing.T) {
	if runtime.GOOS != "linux" || runtime.GOARCH != "amd64" {
		t.Skip("installs the linux/amd64 archive")
	}
	out, err := exec.Command("bash", "../../hack/krew.sh").Output()
	if err != nil {
		t.Fatalf("hack/krew.sh: %v", err)
	}
	tools := strings.TrimSpace(string(out))
	version, err := exec.Command("bash", "../../hack/version.sh").Output()
	if err != nil {
		t.Fatal(err)
	}
	v := strings.TrimSpace(string(version))

	dist := t.TempDir()
	cmd := exec.Command("bash", "hack/build-plugin.sh")
	cmd.Dir = "../.."
	cmd.Env = append(os.Environ(), "DIST="+dist)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("make plugin-dist: %v\n%s", err, out)
	}
	manifest := filepath.Join(dist, "probed.yaml")
	// -skip-install: its install step downloads each platform's uri.
	if out, err := exec.Command(filepath.Join(tools, "validate-krew-manifest"), "-manifest", manifest, "-skip-install").CombinedOutput(); err != nil {
		t.Fatalf("validate-krew-manifest %s: %v\n%s", manifest, err, out)
	}

	// docs/kubectl-plugin.md's install command, run as written (its archive
	// name is worked out by the shell, as a reader's would be) but for the
	// folder and kubectl krew, which is krew's own binary here.
	root := t.TempDir()
	install := exec.Command("bash", "-euc", documentedKrewInstall(t, filepath.Join(tools, "krew"), dist))
	install.Dir = "../.."
	install.Env = append(os.Environ(), "KREW_ROOT="+root, "KREW_NO_UPGRADE_CHECK=1")
	if out, err := install.CombinedOutput(); err != nil {
		t.Fatalf("docs/kubectl-plugin.md's krew install: %v\n%s\nthe archives: %v", err, out, archives(dist))
	}
	got, err := exec.Command(filepath.Join(root, "bin", "kubectl-probed"), "--version").CombinedOutput()
	if err != nil || !strings.HasPrefix(string(got), "kubectl-probed "+v+" ") {
		t.Errorf("the installed plugin says %q (%v), want version %s", got, err, v)
	}
}

// documentedKrewInstall is the install block of docs/kubectl-plugin.md,
// without its make plugin-dist (the test builds into dist), with krew for
// "kubectl krew" and dist for .cache/dist.
func documentedKrewInstall(t *testing.T, krew, dist string) string {
	t.Helper()
	b, err := os.ReadFile("../../docs/kubectl-plugin.md")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile("(?s)```sh\nmake plugin-dist\n(kubectl krew install .*?)```").FindSubmatch(b)
	if m == nil {
		t.Fatal("docs/kubectl-plugin.md has no ```sh block of make plugin-dist and kubectl krew install")
	}
	cmd := string(m[1])
	if !strings.Contains(cmd, "--archive=.cache/dist/") || !strings.Contains(cmd, "--manifest=.cache/dist/probed.yaml") {
		t.Fatalf("the documented command names no archive or manifest in .cache/dist:\n%s", cmd)
	}
	cmd = strings.Replace(cmd, "kubectl krew install", krew+" install", 1)
	return strings.ReplaceAll(cmd, ".cache/dist/", dist+"/")
}

// archives lists the files in dist, for a failure message.
func archives(dist string) []string {
	names, _ := filepath.Glob(filepath.Join(dist, "*"))
	for i, n := range names {
		names[i] = filepath.Base(n)
	}
	return names
}
