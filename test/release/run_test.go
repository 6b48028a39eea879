//go:build release

package release

import (
	"context"
	"errors"
	"fmt"
	"os/exec"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	ctrd "github.com/probed-dev/probed/test/harness/containerd"
)

// TestReleaseImageRuns runs the release archives' linux/amd64 images on a
// real containerd and runc through CRI, as a kubelet on an amd64 node would:
// the binaries execute, say they are the version and commit they were built
// from, and run as the image's non-root user.
func TestReleaseImageRuns(t *testing.T) {
	if arch := goEnvArch(t); arch != "amd64" {
		t.Skipf("the node is %s: this test runs the linux/amd64 image, which only an amd64 node executes", arch)
	}
	dir := release.build(t)
	rev := gitRevision(t)

	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	// The release images are imported below.
	h, images := startContainerd(ctx, t)

	for _, name := range []string{"probed", "probed-webhook"} {
		path := archivePath(dir, name)
		if err := h.ImportImage(ctx, path); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		// The archive holds both architectures under one index; the CRI
		// image must be the amd64 one (a CRI image ID is its config's digest).
		a := readArchive(t, path)
		want, other := configDigest(t, a, name, "amd64"), configDigest(t, a, name, "arm64")
		if got := waitImageID(ctx, t, images, imageRef(name)); got != want {
			t.Fatalf("%s: CRI image ID %s, want the linux/amd64 config %s (linux/arm64's is %s)", name, got, want, other)
		}
	}

	for _, name := range []string{"probed", "probed-webhook"} {
		t.Run(name+" --version", func(t *testing.T) {
			c := startContainer(ctx, t, h, runSpec{name: "version", image: imageRef(name), args: []string{"--version"}})
			out := exitedOK(ctx, t, h, c)
			t.Logf("%s", out)
			prefix := fmt.Sprintf("%s %s (revision %s, built ", name, releaseTag, rev)
			if !strings.HasPrefix(out, prefix) || !strings.HasSuffix(out, " linux/amd64)\n") {
				t.Errorf("output %q, want %q ... linux/amd64)", out, prefix)
			}
			checkSpecUser(ctx, t, h, c)
		})
	}

	t.Run("probed --help", func(t *testing.T) {
		c := startContainer(ctx, t, h, runSpec{name: "help", image: imageRef("probed"), args: []string{"--help"}})
		out := exitedOK(ctx, t, h, c)
		if !strings.HasPrefix(out, "Usage: probed [flags]") || !strings.Contains(out, "-node-name") {
			t.Errorf("output %q, want probed's usage", out)
		}
		checkSpecUser(ctx, t, h, c)
	})

	// probed convert reads stdin until EOF; with stdin held open it stays up,
	// so the kernel's view of the running process can be checked.
	t.Run("probed convert, running", func(t *testing.T) {
		c := startContainer(ctx, t, h, runSpec{name: "convert", image: imageRef("probed"), args: []string{"convert"}, stdin: true})
		info := verboseInfo(ctx, t, h, c.id)
		if info.Pid <= 0 {
			t.Fatalf("verbose status: pid %d", info.Pid)
		}
		comm := procStatus(t, info.Pid, "Name:")
		uids, gids := procStatus(t, info.Pid, "Uid:"), procStatus(t, info.Pid, "Gid:")
		if st, err := h.ContainerState(ctx, c.id); err != nil || st != runtimeapi.ContainerState_CONTAINER_RUNNING {
			t.Fatalf("container state %v (%v) after reading /proc/%d, want running: the PID may be another process's", st, err, info.Pid)
		}
		if comm != "probed" {
			t.Errorf("process %d is %q, want probed", info.Pid, comm)
		}
		t.Logf("process %d %s: Uid %s, Gid %s", info.Pid, comm, uids, gids)
		if want := "65532 65532 65532 65532"; uids != want || gids != want {
			t.Errorf("process %d: Uid %q, Gid %q; want %q for both (the image's user 65532:65532)", info.Pid, uids, gids, want)
		}
	})
}

// startContainerd starts a private containerd with only the pause image
// (the sandbox image, from hack/build-images.sh), stopped when the test
// ends, and returns it with a CRI image client; it skips the test where
// containerd is not built.
func startContainerd(ctx context.Context, t *testing.T) (*ctrd.Containerd, runtimeapi.ImageServiceClient) {
	t.Helper()
	h, err := ctrd.Start(ctx, ctrd.Options{Images: []string{"pause"}, StartTimeout: time.Minute})
	if errors.Is(err, ctrd.ErrMissingBinaries) {
		t.Skipf("skipping: %v", err)
	}
	if err != nil {
		t.Fatalf("start containerd: %v", err)
	}
	t.Cleanup(func() {
		if err := h.Stop(); err != nil {
			t.Errorf("stop containerd: %v", err)
		}
	})
	conn, err := grpc.NewClient(h.Endpoint(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return h, runtimeapi.NewImageServiceClient(conn)
}

// exitedOK waits for the container to exit, wants exit code 0 and returns
// its output.
func exitedOK(ctx context.Context, t *testing.T, h *ctrd.Containerd, c started) string {
	t.Helper()
	st := waitExited(ctx, t, h, c.id)
	out := criLog(t, st.GetLogPath())
	if st.GetExitCode() != 0 {
		t.Fatalf("exit code %d (%s %s), output:\n%s", st.GetExitCode(), st.GetReason(), st.GetMessage(), out)
	}
	return out
}

// checkSpecUser wants the image's user, 65532:65532, in the runtime spec
// containerd gave runc: the test sets none, so it can only come from the image.
func checkSpecUser(ctx context.Context, t *testing.T, h *ctrd.Containerd, c started) {
	t.Helper()
	u := verboseInfo(ctx, t, h, c.id).RuntimeSpec.Process.User
	if u.UID != 65532 || u.GID != 65532 {
		t.Errorf("runtime spec user %d:%d, want 65532:65532", u.UID, u.GID)
	}
}

// configDigest is the config digest of image name's linux/arch image in the archive.
func configDigest(t *testing.T, a archive, name, arch string) string {
	t.Helper()
	var top, idx manifest
	a.json(t, "index.json", &top)
	if len(top.Manifests) != 1 {
		t.Fatalf("%s: index.json has %d manifests, want 1", name, len(top.Manifests))
	}
	a.json(t, top.Manifests[0].Digest, &idx)
	for _, m := range idx.Manifests {
		if m.Platform != nil && m.Platform.OS == "linux" && m.Platform.Architecture == arch {
			var img manifest
			a.json(t, m.Digest, &img)
			return img.Config.Digest
		}
	}
	t.Fatalf("%s: no linux/%s image in the archive", name, arch)
	return ""
}

// waitImageID polls CRI until it knows ref (it learns of imported images
// from containerd's events) and returns the image's ID.
func waitImageID(ctx context.Context, t *testing.T, images runtimeapi.ImageServiceClient, ref string) string {
	t.Helper()
	for {
		resp, err := images.ImageStatus(ctx, &runtimeapi.ImageStatusRequest{Image: &runtimeapi.ImageSpec{Image: ref}})
		if err != nil {
			t.Fatalf("image status %s: %v", ref, err)
		}
		if resp.GetImage() != nil {
			return resp.GetImage().GetId()
		}
		select {
		case <-ctx.Done():
			t.Fatalf("CRI does not know %s: %v", ref, ctx.Err())
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// goEnvArch is the architecture go builds for here, as the build script takes it.
func goEnvArch(t *testing.T) string {
	t.Helper()
	out, err := exec.Command("go", "env", "GOARCH").Output()
	if err != nil {
		t.Fatalf("go env GOARCH: %v", err)
	}
	return strings.TrimSpace(string(out))
}
