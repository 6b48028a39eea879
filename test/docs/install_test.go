package docs

import (
	"os"
	"path/filepath"
	"regexp"
	"testing"

	"github.com/probed-dev/probed/test/harness/repo"
)

// docs/install.md's kustomize wrapper names the images its own make push
// line pushes: used as written, after the steps before it, it must pull
// something that exists. Whatever the wrapper's newName/newTag say, the
// webhook's image follows (TestKustomizeWrapperOverrides, integration).
func TestInstallWrapperNamesThePushedImages(t *testing.T) {
	root, err := repo.Root()
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(root, "docs", "install.md"))
	if err != nil {
		t.Fatal(err)
	}
	push := regexp.MustCompile(`make push REGISTRY=(\S+) TAG=(\S+)`).FindStringSubmatch(string(b))
	if push == nil {
		t.Fatal("docs/install.md has no make push REGISTRY=… TAG=… line")
	}
	wrapper, err := repo.InstallWrapper(root)
	if err != nil {
		t.Fatal(err)
	}
	name := regexp.MustCompile(`(?m)^  newName: (\S+)`).FindStringSubmatch(wrapper)
	tag := regexp.MustCompile(`(?m)^  newTag: (\S+)`).FindStringSubmatch(wrapper)
	if name == nil || tag == nil {
		t.Fatalf("the wrapper sets no newName or newTag:\n%s", wrapper)
	}
	if want := push[1] + "/probed"; name[1] != want || tag[1] != push[2] {
		t.Errorf("the wrapper installs %s:%s; docs/install.md's make push pushed %s:%s", name[1], tag[1], want, push[2])
	}
}
