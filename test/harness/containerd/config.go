package containerd

import (
	"fmt"
	"strconv"
)

// configTOML renders a containerd 1.6/1.7 (config version 2) configuration that
// keeps every path under the run dir, so several private containerds can share
// a machine with each other and with a system containerd.
func (h *Containerd) configTOML() string {
	q := strconv.Quote
	return fmt.Sprintf(`version = 2
root = %[1]s
state = %[2]s
oom_score = 0
# Snapshotters and services the tests never use: fewer plugins, faster start.
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

[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = %[6]s
  # No CAP_SYS_RESOURCE here: the pause container's oom_score_adj of -998 is refused.
  restrict_oom_score_adj = true
  netns_mounts_under_state_dir = true
  disable_tcp_service = true
  # A random port: another containerd on this machine may hold the default 10010.
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
        # runc's state, normally /run/containerd/runc, stays in the run dir too.
        Root = %[7]s

  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "/usr/lib/cni"
    conf_dir = %[8]s
`,
		q(h.path("root")), q(h.path("state")), q(h.Socket()), q(h.Socket()+".ttrpc"),
		q(h.path("opt")), q(PauseImage), q(h.path("runc")), q(h.path("cni")))
}
