//go:build release

package release

import (
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

// The krew manifest make plugin-dist writes passes krew's own validation
// (validate-krew-manifest, as krew-index's CI runs it; built by
// hack/krew.sh), and krew installs the plugin from it and the archive of
// this platform, offline: the version is a semantic version, the checksums
// match, and the installed kubectl-probed says that version.
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

	root := t.TempDir()
	install := exec.Command(filepath.Join(tools, "krew"), "install", "--manifest", manifest,
		"--archive", filepath.Join(dist, "kubectl-probed_"+v+"_linux_amd64.tar.gz"))
	install.Env = append(os.Environ(), "KREW_ROOT="+root, "KREW_NO_UPGRADE_CHECK=1")
	if out, err := install.CombinedOutput(); err != nil {
		t.Fatalf("krew install: %v\n%s", err, out)
	}
	got, err := exec.Command(filepath.Join(root, "bin", "kubectl-probed"), "--version").CombinedOutput()
	if err != nil || !strings.HasPrefix(string(got), "kubectl-probed "+v+" ") {
		t.Errorf("the installed plugin says %q (%v), want version %s", got, err, v)
	}
}
