package worker

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/probed-dev/probed/pkg/cri"
	"github.com/probed-dev/probed/pkg/netns/netnstest"
	"github.com/probed-dev/probed/pkg/prober"
)

type fakeSandboxNetworks map[string]cri.SandboxNetwork

func (f fakeSandboxNetworks) SandboxNetwork(_ context.Context, id string) (cri.SandboxNetwork, error) {
	sn, ok := f[id]
	if !ok {
		return cri.SandboxNetwork{}, cri.ErrContainerNotFound
	}
	return sn, nil
}

// Issue 36: the namespace a probe is sent from is the pod's current
// sandbox's, checked: a runtime with a namespace on the node, a path
// where the runtime keeps them, not the node's own, holding the pod's IP.
func TestPodNetworksOpen(t *testing.T) {
	ns := netnstest.New(t)
	dir := ns.Path()[:strings.LastIndex(ns.Path(), "/")]
	const runc = "io.containerd.runc.v2"
	src := fakeSandboxNetworks{
		"ok":      {IPs: []string{"127.0.0.1"}, NetNS: ns.Path(), Runtime: runc},
		"kata":    {IPs: []string{"127.0.0.1"}, NetNS: ns.Path(), Runtime: "io.containerd.kata.v2"},
		"gvisor":  {IPs: []string{"127.0.0.1"}, NetNS: ns.Path(), Runtime: "io.containerd.runsc.v1"},
		"none":    {IPs: []string{"127.0.0.1"}, Runtime: runc},
		"outside": {IPs: []string{"127.0.0.1"}, NetNS: "/etc/hostname", Runtime: runc},
		"climb":   {IPs: []string{"127.0.0.1"}, NetNS: dir + "/../netns", Runtime: runc},
		"node":    {IPs: []string{"127.0.0.1"}, NetNS: "/proc/self/ns/net", Runtime: runc},
		"wrongIP": {IPs: []string{"10.9.9.9"}, NetNS: ns.Path(), Runtime: runc},
		"noIP":    {NetNS: ns.Path(), Runtime: runc},
	}
	p := &PodNetworks{Sandbox: src, Dirs: []string{dir, "/proc/self/ns"}}
	got, err := p.Open(context.Background(), "ok")
	if err != nil {
		t.Fatal(err)
	}
	if got.ID() != ns.ID() {
		t.Errorf("opened %v; want %v", got.ID(), ns.ID())
	}
	_ = got.Close()
	for id, want := range map[string]string{
		"kata":    `runtime "io.containerd.kata.v2", which has no network namespace on the node`,
		"gvisor":  `runtime "io.containerd.runsc.v1"`,
		"none":    "names no network namespace",
		"outside": "/etc/hostname is not in",
		"climb":   "is not in",
		"node":    "the node's own network namespace",
		"wrongIP": "holds none of the pod's IPs [10.9.9.9]",
		"noIP":    "no IP to check",
		"gone":    "does not say where the pod's network is",
	} {
		ns, err := p.Open(context.Background(), id)
		if err == nil {
			_ = ns.Close()
			t.Errorf("%s: opened; want an error containing %q", id, want)
			continue
		}
		if !errors.Is(err, ErrNoPodNetwork) || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v; want an ErrNoPodNetwork containing %q", id, err, want)
		}
		// Only a runtime without the pod's namespace makes the probe
		// invalid; the rest may pass (a sandbox being replaced).
		if unsupported := id == "kata" || id == "gvisor"; errors.Is(err, prober.ErrPodNetworkUnsupported) != unsupported {
			t.Errorf("%s: %v: ErrPodNetworkUnsupported %v, want %v", id, err, !unsupported, unsupported)
		}
	}
}

// A replaced sandbox (a new container ID) is followed: the worker's
// namespace is reopened, the old one released.
func TestPodNetnsFollowsTheSandbox(t *testing.T) {
	a, b := netnstest.New(t), netnstest.New(t)
	dir := a.Path()[:strings.LastIndex(a.Path(), "/")]
	dirB := b.Path()[:strings.LastIndex(b.Path(), "/")]
	src := fakeSandboxNetworks{
		"c1": {IPs: []string{"127.0.0.1"}, NetNS: a.Path(), Runtime: "io.containerd.runc.v2"},
		"c2": {IPs: []string{"127.0.0.1"}, NetNS: b.Path(), Runtime: "io.containerd.runc.v2"},
	}
	p := &PodNetworks{Sandbox: src, Dirs: []string{dir, dirB}}
	var c PodNetns
	defer c.Close()
	first, err := c.Get(context.Background(), p, "c1")
	if err != nil || first.ID() != a.ID() {
		t.Fatalf("c1: %v %v", first, err)
	}
	again, _ := c.Get(context.Background(), p, "c1")
	if again != first {
		t.Error("the same container's namespace was reopened")
	}
	second, err := c.Get(context.Background(), p, "c2")
	if err != nil || second.ID() != b.ID() {
		t.Fatalf("c2: %v %v", second, err)
	}
	if err := first.Do(func() error { return nil }); err == nil {
		t.Error("the old sandbox's namespace is still open")
	}
}
