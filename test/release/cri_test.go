//go:build release

package release

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	ctrd "github.com/probed-dev/probed/test/harness/containerd"
)

// Running a release image's binary through CRI, as the kubelet would: a pod
// sandbox on the host network, one container with the image's own
// entrypoint and user (no RunAsUser), its output in a CRI log file.

// runSpec is one container of a release image.
type runSpec struct {
	name  string
	image string
	// args follow the image's entrypoint.
	args []string
	// stdin keeps the container's stdin open with nobody writing to it, so a
	// process reading it blocks and stays observable.
	stdin bool
}

// started is a container the CRI has started.
type started struct {
	sandboxID, id string
}

// startContainer runs the pod sandbox and starts the container; the pod is
// removed when the test ends.
func startContainer(ctx context.Context, t *testing.T, h *ctrd.Containerd, s runSpec) started {
	t.Helper()
	cri := h.CRI()
	pod := fmt.Sprintf("%s-%d", s.name, time.Now().UnixNano())
	// The host's network (no CNI needed), a PID namespace of its own as the
	// kubelet gives a container by default.
	namespaces := &runtimeapi.NamespaceOption{Network: runtimeapi.NamespaceMode_NODE, Pid: runtimeapi.NamespaceMode_CONTAINER}
	sandboxCfg := &runtimeapi.PodSandboxConfig{
		Metadata:     &runtimeapi.PodSandboxMetadata{Name: pod, Namespace: "probed-release-test", Uid: "uid-" + pod},
		LogDirectory: filepath.Join(h.RunDir(), "logs", pod),
		Linux: &runtimeapi.LinuxPodSandboxConfig{
			// Under the harness's cgroup parent, so its Stop sweeps whatever is left.
			CgroupParent: h.CgroupParent(),
			SecurityContext: &runtimeapi.LinuxSandboxSecurityContext{
				NamespaceOptions: namespaces,
			},
		},
	}
	sb, err := cri.RunPodSandbox(ctx, &runtimeapi.RunPodSandboxRequest{Config: sandboxCfg})
	if err != nil {
		t.Fatalf("%s: run pod sandbox: %v", s.name, err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := h.RemovePod(ctx, sb.PodSandboxId); err != nil {
			t.Errorf("%s: %v", s.name, err)
		}
	})
	cc, err := cri.CreateContainer(ctx, &runtimeapi.CreateContainerRequest{
		PodSandboxId: sb.PodSandboxId,
		Config: &runtimeapi.ContainerConfig{
			Metadata: &runtimeapi.ContainerMetadata{Name: s.name},
			Image:    &runtimeapi.ImageSpec{Image: s.image},
			Args:     s.args,
			Stdin:    s.stdin,
			LogPath:  s.name + ".log",
			Linux: &runtimeapi.LinuxContainerConfig{SecurityContext: &runtimeapi.LinuxContainerSecurityContext{
				NamespaceOptions: namespaces,
			}},
		},
		SandboxConfig: sandboxCfg,
	})
	if err != nil {
		t.Fatalf("%s: create container: %v", s.name, err)
	}
	if _, err := cri.StartContainer(ctx, &runtimeapi.StartContainerRequest{ContainerId: cc.ContainerId}); err != nil {
		t.Fatalf("%s: start container: %v", s.name, err)
	}
	return started{sandboxID: sb.PodSandboxId, id: cc.ContainerId}
}

// waitExited polls the container's CRI status until it has exited.
func waitExited(ctx context.Context, t *testing.T, h *ctrd.Containerd, id string) *runtimeapi.ContainerStatus {
	t.Helper()
	for {
		st, err := h.ContainerStatus(ctx, id)
		if err != nil {
			t.Fatalf("container status: %v", err)
		}
		if st.GetState() == runtimeapi.ContainerState_CONTAINER_EXITED {
			return st
		}
		select {
		case <-ctx.Done():
			t.Fatalf("container %s still %v: %v", id, st.GetState(), ctx.Err())
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// criLog is the text of a CRI log file, stdout and stderr interleaved, without
// each line's "<time> <stream> <P|F> " prefix.
func criLog(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("container log: %v", err)
	}
	var out strings.Builder
	for _, line := range strings.SplitAfter(string(b), "\n") {
		fields := strings.SplitN(line, " ", 4)
		if len(fields) < 4 {
			continue
		}
		out.WriteString(fields[3])
	}
	return out.String()
}

// containerInfo is what containerd's verbose CRI status says about the
// process it started: its host PID and the user runc was told to run it as.
type containerInfo struct {
	Pid         int `json:"pid"`
	RuntimeSpec struct {
		Process struct {
			User struct{ UID, GID uint32 } `json:"user"`
		} `json:"process"`
	} `json:"runtimeSpec"`
}

func verboseInfo(ctx context.Context, t *testing.T, h *ctrd.Containerd, id string) containerInfo {
	t.Helper()
	resp, err := h.CRI().ContainerStatus(ctx, &runtimeapi.ContainerStatusRequest{ContainerId: id, Verbose: true})
	if err != nil {
		t.Fatalf("verbose container status: %v", err)
	}
	var info containerInfo
	if err := json.Unmarshal([]byte(resp.GetInfo()["info"]), &info); err != nil {
		t.Fatalf("container %s: verbose info %q: %v", id, resp.GetInfo()["info"], err)
	}
	return info
}

// procStatus returns the fields of the /proc/<pid>/status line starting with
// key, space-separated: for "Uid:", the real, effective, saved and
// filesystem user IDs.
func procStatus(t *testing.T, pid int, key string) string {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatalf("process %d: %v", pid, err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, key); ok {
			return strings.Join(strings.Fields(v), " ")
		}
	}
	t.Fatalf("process %d: no %s in its status", pid, key)
	return ""
}
