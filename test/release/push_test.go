//go:build release

package release

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"sigs.k8s.io/yaml"

	"github.com/probed-dev/probed/test/harness/proc"
	"github.com/probed-dev/probed/test/harness/repo"
)

// startRegistry runs Debian's docker-registry (distribution 2.8) on a free
// loopback port, its storage in a temporary directory, until the test ends,
// and returns its host:port.
func startRegistry(t *testing.T) string {
	t.Helper()
	bin, err := exec.LookPath("docker-registry")
	if err != nil {
		t.Skip("docker-registry is not installed: run hack/install-deps.sh")
	}
	dir := t.TempDir()
	config := fmt.Sprintf("version: 0.1\nlog:\n  level: info\nstorage:\n  filesystem:\n    rootdirectory: %s\nhttp:\n  addr: 127.0.0.1:0\n", dir)
	if err := os.WriteFile(filepath.Join(dir, "config.yml"), []byte(config), 0o644); err != nil {
		t.Fatal(err)
	}
	// Killed at the end: it holds nothing the next test needs.
	d := proc.StartDaemon(t, "docker-registry", bin, []string{"serve", filepath.Join(dir, "config.yml")},
		proc.DaemonOptions{KillAtEnd: true, TailLines: 200})
	listening := regexp.MustCompile(`msg="listening on (127\.0\.0\.1:[0-9]+)"`)
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		out, _ := d.Output()
		if m := listening.FindSubmatch(out); m != nil {
			return string(m[1])
		}
		if done, err := d.Exited(); done {
			t.Fatalf("docker-registry exited before it listened: %v", err)
		}
	}
	t.Fatal("docker-registry did not say where it listens within 30s")
	return ""
}

// manifestDigest asks the registry for ref's manifest and returns its media
// type, its digest and the platforms of an index.
func manifestDigest(t *testing.T, registry, repoPath, tag string) (mediaType, digest string, platforms []string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, fmt.Sprintf("http://%s/v2/%s/manifests/%s", registry, repoPath, tag), nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Accept", "application/vnd.oci.image.index.v1+json, application/vnd.docker.distribution.manifest.list.v2+json")
	req.Close = true // no idle connection left for TestMain's goleak
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %s %v\n%s", req.URL, resp.Status, err, b)
	}
	var idx manifest
	if err := json.Unmarshal(b, &idx); err != nil {
		t.Fatal(err)
	}
	for _, m := range idx.Manifests {
		if m.Platform != nil {
			platforms = append(platforms, m.Platform.OS+"/"+m.Platform.Architecture)
		}
	}
	slices.Sort(platforms)
	return resp.Header.Get("Content-Type"), resp.Header.Get("Docker-Content-Digest"), platforms
}

// toolDir runs a hack/ script that prints the directory of a tool it built.
func toolDir(t *testing.T, script string) string {
	t.Helper()
	cmd := exec.Command("bash", script)
	cmd.Dir = "../.."
	out, err := cmd.Output()
	if err != nil {
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			t.Fatalf("%s: %v\n%s", script, err, ee.Stderr)
		}
		t.Fatalf("%s: %v", script, err)
	}
	return strings.TrimSpace(string(out))
}

// workloadImages lists the image of every container of the DaemonSets and
// Deployments in a rendered stream, by "<kind>/<name>".
func workloadImages(t *testing.T, rendered []byte) map[string]string {
	t.Helper()
	out := map[string]string{}
	for _, doc := range strings.Split(string(rendered), "\n---") {
		var o struct {
			Kind     string
			Metadata struct{ Name string }
			Spec     struct {
				Template struct {
					Spec struct {
						Containers []struct{ Image string }
					}
				}
			}
		}
		if err := yaml.Unmarshal([]byte(doc), &o); err != nil {
			t.Fatalf("rendered output: %v", err)
		}
		if o.Kind != "DaemonSet" && o.Kind != "Deployment" {
			continue
		}
		for _, c := range o.Spec.Template.Spec.Containers {
			out[o.Kind+"/"+o.Metadata.Name] = c.Image
		}
	}
	return out
}

// `make push` puts both release images, every architecture, into a real
// registry (Debian's docker-registry on loopback, plain HTTP, as no public
// registry can be reached here); the chart and docs/install.md's kustomize
// wrapper, given that registry and tag, name exactly what was pushed; and
// a real containerd pulls those names through CRI, as a node's kubelet
// would, getting the linux/amd64 image of each.
func TestPushInstallPull(t *testing.T) {
	dir := release.build(t)
	registry := startRegistry(t)
	prefix := registry + "/team"

	push := exec.Command("make", "-s", "push", "REGISTRY="+prefix, "TAG="+releaseTag, "PUSH_FLAGS=--dest-tls-verify=false")
	push.Dir = "../.."
	push.Env = append(os.Environ(), "PROBED_RELEASE_DIR="+dir)
	out, err := push.CombinedOutput()
	if err != nil {
		t.Fatalf("make push: %v\n%s", err, out)
	}
	t.Logf("make push:\n%s", out)
	for _, name := range []string{"probed", "probed-webhook"} {
		mt, digest, platforms := manifestDigest(t, registry, "team/"+name, releaseTag)
		if mt != "application/vnd.oci.image.index.v1+json" || !slices.Equal(platforms, []string{"linux/amd64", "linux/arm64"}) {
			t.Errorf("%s: the registry serves %s for %v, want an OCI index of linux/amd64 and linux/arm64", name, mt, platforms)
		}
		if want := fmt.Sprintf("push-images: %s/%s:%s@%s\n", prefix, name, releaseTag, digest); digest == "" || !strings.Contains(string(out), want) {
			t.Errorf("make push did not print %q", want)
		}
	}

	// What the install paths name, given the registry and tag.
	want := map[string]string{"probed": prefix + "/probed:" + releaseTag, "probed-webhook": prefix + "/probed-webhook:" + releaseTag}
	helm := filepath.Join(toolDir(t, "hack/helm.sh"), "helm")
	rendered, err := exec.Command(helm, "template", "probed", "../../charts/probed", "--namespace", "probed-system",
		"--set", "image.registry="+prefix, "--set", "image.tag="+releaseTag).Output()
	if err != nil {
		t.Fatalf("helm template: %v", err)
	}
	chart := workloadImages(t, rendered)
	if chart["DaemonSet/probed"] != want["probed"] || chart["Deployment/probed-webhook"] != want["probed-webhook"] {
		t.Errorf("the chart installs %v, want %v", chart, want)
	}
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	wrapper, err := repo.InstallWrapper(root)
	if err != nil {
		t.Fatal(err)
	}
	wrapper = regexp.MustCompile(`(?m)^  newName: .*$`).ReplaceAllString(wrapper, "  newName: "+prefix+"/probed")
	wrapper = regexp.MustCompile(`(?m)^  newTag: .*$`).ReplaceAllString(wrapper, "  newTag: "+releaseTag)
	work := t.TempDir()
	if err := os.Symlink(root, filepath.Join(work, "probed")); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(work, "my-probed"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(work, "my-probed", "kustomization.yaml"), []byte(wrapper), 0o644); err != nil {
		t.Fatal(err)
	}
	kubectl := filepath.Join(toolDir(t, "hack/build-kubectl.sh"), "kubectl")
	rendered, err = exec.Command(kubectl, "kustomize", filepath.Join(work, "my-probed")).CombinedOutput()
	if err != nil {
		t.Fatalf("kubectl kustomize of docs/install.md's wrapper: %v\n%s", err, rendered)
	}
	kust := workloadImages(t, rendered)
	if kust["DaemonSet/probed"] != want["probed"] || kust["Deployment/probed-webhook"] != want["probed-webhook"] {
		t.Errorf("the kustomize wrapper installs %v, want %v", kust, want)
	}

	if arch := goEnvArch(t); arch != "amd64" {
		t.Skipf("the node is %s: the pull below checks the linux/amd64 image", arch)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	_, images := startContainerd(ctx, t)
	for _, name := range []string{"probed", "probed-webhook"} {
		ref := chart[map[string]string{"probed": "DaemonSet/probed", "probed-webhook": "Deployment/probed-webhook"}[name]]
		pulled, err := images.PullImage(ctx, &runtimeapi.PullImageRequest{Image: &runtimeapi.ImageSpec{Image: ref}})
		if err != nil {
			t.Fatalf("CRI pull of %s: %v", ref, err)
		}
		wantID := configDigest(t, readArchive(t, archivePath(dir, name)), name, "amd64")
		if got := waitImageID(ctx, t, images, ref); got != wantID {
			t.Errorf("%s: pulled image %s (%s), want the linux/amd64 config %s", ref, got, pulled.GetImageRef(), wantID)
		}
	}
}
