package worker

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"path/filepath"
	"slices"
	"strings"

	"github.com/probed-dev/probed/pkg/cri"
	"github.com/probed-dev/probed/pkg/netns"
	"github.com/probed-dev/probed/pkg/prober"
)

// SandboxNetworkSource says where the network namespace of the sandbox a
// container runs in is, for the caller's own container only (the
// cri.Owner in ctx; cri.Verified).
type SandboxNetworkSource interface {
	SandboxNetwork(ctx context.Context, containerID string) (cri.SandboxNetwork, error)
}

// PodNetworks opens pods' network namespaces for probes sent from inside
// the pod ("probed.io/from": "Pod", --pod-network-probes). It is shared by
// every worker and keeps no state; each worker keeps the namespace of its
// container's current sandbox open (podNetns).
type PodNetworks struct {
	// Sandbox is the runtime's answer. Required.
	Sandbox SandboxNetworkSource
	// Dirs are the directories the runtime's namespace paths must be in;
	// empty: DefaultNetnsDirs.
	Dirs []string
}

// DefaultNetnsDirs is where containerd and CRI-O bind-mount the network
// namespaces they make for pods.
var DefaultNetnsDirs = []string{"/var/run/netns", "/run/netns"}

// namespacedRuntimes are the runtimes whose pods live in a Linux network
// namespace on the node (containerd's runc shims, which crun uses too;
// CRI-O's "oci"). Others run a pod in a VM (Kata, Firecracker) or behind a
// user-space network stack (gVisor): a namespace on the node, if any, is
// not where the pod's loopback is.
var namespacedRuntimes = []string{"io.containerd.runc.v2", "io.containerd.runc.v1", "oci"}

// ErrNoPodNetwork marks why a pod's network namespace cannot be used.
var ErrNoPodNetwork = errors.New("probed.io/from Pod")

// Open opens and checks the network namespace of the sandbox containerID
// runs in: the runtime must run the pod in a network namespace on the
// node, the namespace must not be probed's (the node's), and it must hold
// one of the IPs the runtime gave the sandbox.
func (p *PodNetworks) Open(ctx context.Context, containerID string) (*netns.NS, error) {
	sn, err := p.Sandbox.SandboxNetwork(ctx, containerID)
	if err != nil {
		return nil, fmt.Errorf("%w: the runtime does not say where the pod's network is: %w", ErrNoPodNetwork, err)
	}
	if !slices.Contains(namespacedRuntimes, sn.Runtime) {
		return nil, fmt.Errorf("%w: the pod runs under runtime %q, which has no network namespace on the node that is the pod's (a VM or a user-space network stack): %w; use a probe from the node", ErrNoPodNetwork, sn.Runtime, prober.ErrPodNetworkUnsupported)
	}
	if sn.NetNS == "" {
		return nil, fmt.Errorf("%w: the runtime names no network namespace for the pod's sandbox", ErrNoPodNetwork)
	}
	if !p.allowed(sn.NetNS) {
		return nil, fmt.Errorf("%w: the runtime's network namespace %s is not in %s", ErrNoPodNetwork, sn.NetNS, strings.Join(p.dirs(), " or "))
	}
	ns, err := netns.Open(sn.NetNS)
	if err != nil {
		return nil, fmt.Errorf("%w: opening the pod's network namespace (is %s mounted into probed? deploy/pod-netns): %w", ErrNoPodNetwork, filepath.Dir(sn.NetNS), err)
	}
	if err := checkPodNetns(ns, sn.IPs); err != nil {
		_ = ns.Close()
		return nil, fmt.Errorf("%w: %s: %w", ErrNoPodNetwork, sn.NetNS, err)
	}
	return ns, nil
}

func (p *PodNetworks) dirs() []string {
	if len(p.Dirs) > 0 {
		return p.Dirs
	}
	return DefaultNetnsDirs
}

// allowed reports whether path is a file right inside one of the dirs.
func (p *PodNetworks) allowed(path string) bool {
	if !filepath.IsAbs(path) || filepath.Clean(path) != path {
		return false
	}
	return slices.Contains(p.dirs(), filepath.Dir(path))
}

// checkPodNetns checks that ns is a pod's: not the node's (probed's own,
// or PID 1's where probed sees the host's processes) and holding one of
// the pod's IPs.
func checkPodNetns(ns *netns.NS, podIPs []string) error {
	for _, host := range []func() (netns.ID, error){netns.Self, func() (netns.ID, error) { return netns.Of("/proc/1/ns/net") }} {
		if id, err := host(); err == nil && id == ns.ID() {
			return errors.New("it is the node's own network namespace")
		}
	}
	if len(podIPs) == 0 {
		return errors.New("the runtime gave the sandbox no IP to check the namespace against")
	}
	for _, s := range podIPs {
		a, err := netip.ParseAddr(s)
		if err != nil {
			continue
		}
		ok, err := ns.HasAddr(a)
		if err != nil {
			return fmt.Errorf("reading its addresses: %w", err)
		}
		if ok {
			return nil
		}
	}
	return fmt.Errorf("it holds none of the pod's IPs %v", podIPs)
}

// PodNetns is one worker's namespace: that of its container's current
// sandbox, reopened when the container ID changes (a new container or a
// replaced sandbox). The zero value is ready; it is not safe for
// concurrent use (a worker probes one at a time).
type PodNetns struct {
	containerID string
	ns          *netns.NS
}

// Get returns the namespace for containerID, opening it through p, and
// closes the one it had for another container ID.
func (c *PodNetns) Get(ctx context.Context, p *PodNetworks, containerID string) (*netns.NS, error) {
	if c.ns != nil && c.containerID == containerID {
		return c.ns, nil
	}
	c.Close()
	ns, err := p.Open(ctx, containerID)
	if err != nil {
		return nil, err
	}
	c.containerID, c.ns = containerID, ns
	return ns, nil
}

// Close releases the namespace.
func (c *PodNetns) Close() {
	if c.ns != nil {
		_ = c.ns.Close()
		c.ns, c.containerID = nil, ""
	}
}
