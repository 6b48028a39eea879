package node

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"

	"golang.org/x/sys/unix"
	corev1 "k8s.io/api/core/v1"
)

// defaultPodNetnsDir is where deploy/pod-netns mounts the runtime's pods'
// network namespaces from: containerd's default.
const defaultPodNetnsDir = "/var/run/netns"

// PodNetnsDir is where this node's containerd keeps its pods' network
// namespaces: under its CRI state dir (netns_mounts_under_state_dir), so
// that the node touches nothing of the host's /var/run/netns.
func (n *Node) PodNetnsDir() string {
	return filepath.Join(n.RunDir, "containerd", "state", "io.containerd.grpc.v1.cri", "netns")
}

// movePodNetnsDir moves what deploy/pod-netns mounts to dir, when the
// DaemonSet has it (--pod-network-probes=true): the host path, the mount
// path (the same, as the runtime names the namespaces) and
// --pod-netns-dir. dir becomes a shared mount, as /run is on a systemd
// host, for the runtime to allow HostToContainer propagation from it;
// cleanupHost unmounts everything under the run dir.
func movePodNetnsDir(spec *corev1.PodSpec, c *corev1.Container, dir string) error {
	if !slices.Contains(c.Args, "--pod-network-probes=true") {
		return nil
	}
	if err := sharedMount(dir); err != nil {
		return err
	}
	for i := range spec.Volumes {
		if hp := spec.Volumes[i].HostPath; hp != nil && hp.Path == defaultPodNetnsDir {
			hp.Path = dir
		}
	}
	for i := range c.VolumeMounts {
		if c.VolumeMounts[i].MountPath == defaultPodNetnsDir {
			c.VolumeMounts[i].MountPath = dir
		}
	}
	c.Args = setArg(c.Args, "--pod-netns-dir", dir)
	return nil
}

// sharedMount makes dir a shared mount point: a bind mount of itself.
func sharedMount(dir string) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	if !slices.Contains(mountsUnder(dir), dir) {
		if err := unix.Mount(dir, dir, "", unix.MS_BIND|unix.MS_REC, ""); err != nil {
			return fmt.Errorf("bind mount %s: %w", dir, err)
		}
	}
	if err := unix.Mount("", dir, "", unix.MS_SHARED|unix.MS_REC, ""); err != nil {
		return fmt.Errorf("make %s shared: %w", dir, err)
	}
	return nil
}
