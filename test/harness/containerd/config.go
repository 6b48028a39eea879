package containerd

import (
	"fmt"
	"strconv"
)

// configTOML renders a configuration for containerd of the given major
// version that keeps every path under the run dir, so several private
// containerds can share a machine with each other and with a system
// containerd. containerd 2 reads version 3, which splits the CRI plugin into
// cri.v1.runtime, cri.v1.images and grpc.v1.cri; 1.6/1.7 read version 2.
func (h *Containerd) configTOML(major int) string {
	q := strconv.Quote
	paths := []any{q(h.path("root")), q(h.path("state")), q(h.Socket()), q(h.Socket() + ".ttrpc"),
		q(h.path("opt")), q(PauseImage), q(h.path("runc")), q(h.path("cni"))}
	if major >= 2 {
		return fmt.Sprintf(configV3, paths...)
	}
	return fmt.Sprintf(configV2, paths...)
}

// common is the part both versions share: paths, sockets and the plugins
// the tests never use (fewer plugins, faster start).
const common = `root = %[1]s
state = %[2]s
oom_score = 0
disabled_plugins = [
  "io.containerd.snapshotter.v1.aufs",
  "io.containerd.snapshotter.v1.btrfs",
  "io.containerd.snapshotter.v1.devmapper",
  "io.containerd.snapshotter.v1.zfs",
]

[grpc]
  address = %[3]s

[ttrpc]
  address = %[4]s

[debug]
  address = ""
  level = "info"

[metrics]
  address = ""

[plugins."io.containerd.internal.v1.opt"]
  path = %[5]s
`

// Both: no CAP_SYS_RESOURCE here, so the pause container's oom_score_adj of
// -998 would be refused (restrict_oom_score_adj); the stream server on a
// random loopback port, since another containerd may hold 10010; runc's
// state (normally /run/containerd/runc) in the run dir.
const configV3 = `version = 3
` + common + `
[plugins."io.containerd.cri.v1.images"]
  snapshotter = "overlayfs"
  [plugins."io.containerd.cri.v1.images".pinned_images]
    sandbox = %[6]s

[plugins."io.containerd.cri.v1.runtime"]
  restrict_oom_score_adj = true
  netns_mounts_under_state_dir = true
  enable_selinux = false

  [plugins."io.containerd.cri.v1.runtime".containerd]
    default_runtime_name = "runc"

    [plugins."io.containerd.cri.v1.runtime".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"

      [plugins."io.containerd.cri.v1.runtime".containerd.runtimes.runc.options]
        SystemdCgroup = false
        Root = %[7]s

  [plugins."io.containerd.cri.v1.runtime".cni]
    bin_dirs = ["/usr/lib/cni"]
    conf_dir = %[8]s

[plugins."io.containerd.grpc.v1.cri"]
  disable_tcp_service = true
  stream_server_address = "127.0.0.1"
  stream_server_port = "0"
`

const configV2 = `version = 2
` + common + `
[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = %[6]s
  restrict_oom_score_adj = true
  netns_mounts_under_state_dir = true
  disable_tcp_service = true
  stream_server_address = "127.0.0.1"
  stream_server_port = "0"
  enable_selinux = false

  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"

    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"

      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        SystemdCgroup = false
        Root = %[7]s

  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "/usr/lib/cni"
    conf_dir = %[8]s
`
