//go:build release

package release

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

// releaseTag is the TAG and VERSION the tests build the release images
// with: the images' tag, and what their binaries say they are.
const releaseTag = "v0.0.0-releasetest"

// releaseBuild is `make image`'s output, built at most once per test binary
// into a directory TestMain made and removes.
type releaseBuild struct {
	once sync.Once
	dir  string
	out  []byte
	err  error
}

// build returns the directory holding the release archives and SBOMs,
// running hack/build-probed-image.sh --release on first use.
func (b *releaseBuild) build(t *testing.T) string {
	t.Helper()
	b.once.Do(func() {
		cmd := exec.Command("bash", "hack/build-probed-image.sh", "--release")
		cmd.Dir = "../.."
		cmd.Env = append(os.Environ(), "PROBED_RELEASE_DIR="+b.dir, "TAG="+releaseTag, "VERSION="+releaseTag,
			"REPO=example.com/probed", "WEBHOOK_REPO=example.com/probed-webhook")
		b.out, b.err = cmd.CombinedOutput()
	})
	if b.err != nil {
		t.Fatalf("make image: %v\n%s", b.err, b.out)
	}
	return b.dir
}

// archivePath is the multi-architecture OCI archive of image name (probed
// or probed-webhook) in the release dir.
func archivePath(dir, name string) string {
	return filepath.Join(dir, fmt.Sprintf("%s_%s.oci.tar", name, releaseTag))
}

// imageRef is the reference the archive's index names image name by.
func imageRef(name string) string { return "example.com/" + name + ":" + releaseTag }

// gitRevision is the commit the build script stamps into the binaries.
func gitRevision(t *testing.T) string {
	t.Helper()
	cmd := exec.Command("git", "rev-parse", "HEAD")
	cmd.Dir = "../.."
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("git rev-parse HEAD: %v", err)
	}
	return strings.TrimSpace(string(out))
}
