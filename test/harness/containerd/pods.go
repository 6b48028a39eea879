package containerd

import (
	"context"
	"fmt"
	"path/filepath"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// ContainerSpec describes a one-container test pod.
type ContainerSpec struct {
	// Name of the container (and, with a random suffix, of its pod); default "c".
	Name string
	// Image; default BusyboxImage.
	Image string
	// Command overrides the image entrypoint; Args its cmd.
	Command, Args []string
	// Env is the container's environment, in order.
	Env []EnvVar
	// WorkingDir overrides the image's working directory.
	WorkingDir string
	// RunAsUser and RunAsGroup, when set, pick the container's user.
	RunAsUser, RunAsGroup *int64
	// PodNetwork gives the pod a network namespace of its own, which the
	// CRI plugin sets up with the network config in CNIConfDir; otherwise
	// the pod is on the host network.
	PodNetwork bool
}

// EnvVar is one environment variable.
type EnvVar struct{ Name, Value string }

// Container is a running test container and its pod sandbox.
type Container struct {
	PodSandboxID string
	// ID is the bare containerd container ID.
	ID string
	// The pod and container, as the kubelet's labels on both name them.
	PodNamespace, PodName, PodUID, Name string
}

// RuntimeID is the ID as a pod status carries it: "containerd://<id>".
func (c *Container) RuntimeID() string { return "containerd://" + c.ID }

// PodMeta names a test pod as the API server would: the kubelet's labels
// on its sandbox and containers carry it.
type PodMeta struct {
	Namespace, Name, UID string
}

// RunContainer creates a pod sandbox, on the host network (no CNI needed)
// unless spec.PodNetwork, with the container in its own PID namespace, as
// the kubelet does by default, and starts the container. Remove it with RemovePod, or leave it to Stop.
func (h *Containerd) RunContainer(ctx context.Context, spec ContainerSpec) (*Container, error) {
	if spec.Name == "" {
		spec.Name = "c"
	}
	suffix := randomSuffix()
	cs, err := h.RunPod(ctx, PodMeta{Namespace: "probed-test", Name: spec.Name + "-" + suffix, UID: "uid-" + suffix}, spec)
	if err != nil {
		return nil, err
	}
	return cs[0], nil
}

// RunPod creates one pod sandbox named by pod, as RunContainer does, and
// starts each container in it, in order. Remove it with RemovePod (of any
// of its containers' PodSandboxID), or leave it to Stop.
func (h *Containerd) RunPod(ctx context.Context, pod PodMeta, specs ...ContainerSpec) (_ []*Container, retErr error) {
	// One network for the pod: its own (CNI) if any container asks for it.
	network := runtimeapi.NamespaceMode_NODE
	for _, spec := range specs {
		if spec.PodNetwork {
			network = runtimeapi.NamespaceMode_POD
		}
	}
	logDir := filepath.Join(h.path("logs"), pod.Namespace+"_"+pod.Name)
	// The kubelet's labels (kuberuntime's newPodLabels and
	// newContainerLabels), which probed checks before an exec or a stop.
	podLabels := map[string]string{
		"io.kubernetes.pod.name":      pod.Name,
		"io.kubernetes.pod.namespace": pod.Namespace,
		"io.kubernetes.pod.uid":       pod.UID,
	}
	sandboxCfg := &runtimeapi.PodSandboxConfig{
		Metadata: &runtimeapi.PodSandboxMetadata{
			Name: pod.Name, Namespace: pod.Namespace, Uid: pod.UID,
		},
		Labels:       podLabels,
		LogDirectory: logDir,
		Linux: &runtimeapi.LinuxPodSandboxConfig{
			// Every container of every test pod lives below this parent; Stop sweeps it.
			CgroupParent: h.cgroupParent,
			SecurityContext: &runtimeapi.LinuxSandboxSecurityContext{
				NamespaceOptions: &runtimeapi.NamespaceOption{
					Network: network,
					Pid:     runtimeapi.NamespaceMode_CONTAINER,
					Ipc:     runtimeapi.NamespaceMode_POD,
				},
			},
		},
	}
	sb, err := h.cri.RunPodSandbox(ctx, &runtimeapi.RunPodSandboxRequest{Config: sandboxCfg})
	if err != nil {
		return nil, fmt.Errorf("run pod sandbox: %w", err)
	}
	defer func() {
		if retErr != nil {
			_ = h.RemovePod(context.WithoutCancel(ctx), sb.PodSandboxId)
		}
	}()
	var out []*Container
	for _, spec := range specs {
		id, err := h.startContainer(ctx, sb.PodSandboxId, sandboxCfg, podLabels, spec)
		if err != nil {
			return nil, err
		}
		out = append(out, &Container{PodSandboxID: sb.PodSandboxId, ID: id,
			PodNamespace: pod.Namespace, PodName: pod.Name, PodUID: pod.UID, Name: spec.Name})
	}
	return out, nil
}

// startContainer creates and starts one container of a sandbox.
func (h *Containerd) startContainer(ctx context.Context, sandboxID string, sandboxCfg *runtimeapi.PodSandboxConfig, podLabels map[string]string, spec ContainerSpec) (string, error) {
	if spec.Name == "" {
		spec.Name = "c"
	}
	if spec.Image == "" {
		spec.Image = BusyboxImage
	}
	containerLabels := map[string]string{"io.kubernetes.container.name": spec.Name}
	for k, v := range podLabels {
		containerLabels[k] = v
	}
	var envs []*runtimeapi.KeyValue
	for _, e := range spec.Env {
		envs = append(envs, &runtimeapi.KeyValue{Key: e.Name, Value: []byte(e.Value)})
	}
	sc := &runtimeapi.LinuxContainerSecurityContext{
		NamespaceOptions: &runtimeapi.NamespaceOption{
			Network: sandboxCfg.Linux.SecurityContext.NamespaceOptions.Network,
			Pid:     runtimeapi.NamespaceMode_CONTAINER,
			Ipc:     runtimeapi.NamespaceMode_POD,
		},
	}
	if spec.RunAsUser != nil {
		sc.RunAsUser = &runtimeapi.Int64Value{Value: *spec.RunAsUser}
	}
	if spec.RunAsGroup != nil {
		sc.RunAsGroup = &runtimeapi.Int64Value{Value: *spec.RunAsGroup}
	}
	cc, err := h.cri.CreateContainer(ctx, &runtimeapi.CreateContainerRequest{
		PodSandboxId: sandboxID,
		Config: &runtimeapi.ContainerConfig{
			Metadata:   &runtimeapi.ContainerMetadata{Name: spec.Name},
			Labels:     containerLabels,
			Image:      &runtimeapi.ImageSpec{Image: spec.Image},
			Command:    spec.Command,
			Args:       spec.Args,
			WorkingDir: spec.WorkingDir,
			Envs:       envs,
			LogPath:    spec.Name + ".log",
			Linux:      &runtimeapi.LinuxContainerConfig{SecurityContext: sc},
		},
		SandboxConfig: sandboxCfg,
	})
	if err != nil {
		return "", fmt.Errorf("create container %s: %w", spec.Name, err)
	}
	if _, err := h.cri.StartContainer(ctx, &runtimeapi.StartContainerRequest{ContainerId: cc.ContainerId}); err != nil {
		return "", fmt.Errorf("start container %s: %w", spec.Name, err)
	}
	return cc.ContainerId, nil
}

// RemovePod stops and removes a pod sandbox and its containers.
func (h *Containerd) RemovePod(ctx context.Context, podSandboxID string) error {
	if _, err := h.cri.StopPodSandbox(ctx, &runtimeapi.StopPodSandboxRequest{PodSandboxId: podSandboxID}); err != nil {
		return fmt.Errorf("stop pod sandbox %s: %w", podSandboxID, err)
	}
	if _, err := h.cri.RemovePodSandbox(ctx, &runtimeapi.RemovePodSandboxRequest{PodSandboxId: podSandboxID}); err != nil {
		return fmt.Errorf("remove pod sandbox %s: %w", podSandboxID, err)
	}
	return nil
}

// ContainerStatus reports the CRI status of a container: state, exit code, reason.
func (h *Containerd) ContainerStatus(ctx context.Context, id string) (*runtimeapi.ContainerStatus, error) {
	resp, err := h.cri.ContainerStatus(ctx, &runtimeapi.ContainerStatusRequest{ContainerId: id})
	if err != nil {
		return nil, err
	}
	return resp.GetStatus(), nil
}

// ContainerState reports the CRI state of a container.
func (h *Containerd) ContainerState(ctx context.Context, id string) (runtimeapi.ContainerState, error) {
	st, err := h.ContainerStatus(ctx, id)
	if err != nil {
		return runtimeapi.ContainerState_CONTAINER_UNKNOWN, err
	}
	return st.GetState(), nil
}

// Exec runs cmd in a container through CRI, independent of the code under
// test, and returns stdout (stderr appended) and the exit code.
func (h *Containerd) Exec(ctx context.Context, id string, cmd ...string) (string, int32, error) {
	resp, err := h.cri.ExecSync(ctx, &runtimeapi.ExecSyncRequest{ContainerId: id, Cmd: cmd, Timeout: 10})
	if err != nil {
		return "", -1, err
	}
	return string(resp.Stdout) + string(resp.Stderr), resp.ExitCode, nil
}
