//go:build runtime

package runtimetest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"testing"
	"time"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/probed-dev/probed/pkg/cri"
	"github.com/probed-dev/probed/pkg/cri/decorator"
	ctrd "github.com/probed-dev/probed/test/harness/containerd"
)

// The test pod network: a bridge with no address on the host (no
// gateway, no masquerading, no route), so nothing of the machine's own
// networking changes; host-local IPAM hands out one IPv4 and one IPv6
// address per sandbox.
const (
	testPodSubnet4 = "10.250.30.0/24"
	testPodSubnet6 = "fd00:30:4::/64"
)

// podNetwork gives h's CRI plugin a pod network for the rest of the test:
// it writes the network config, waits until the runtime reports the
// network ready, and removes both config and bridge at the end.
func podNetwork(t *testing.T, h *ctrd.Containerd) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("a pod network needs root")
	}
	bridge := fmt.Sprintf("prt%d", os.Getpid()%1000000)
	conf, err := json.Marshal(map[string]any{
		"cniVersion": "1.0.0",
		"name":       "probed-runtime-test",
		"plugins": []any{map[string]any{
			"type": "bridge", "bridge": bridge, "isGateway": false, "ipMasq": false,
			"ipam": map[string]any{
				"type":    "host-local",
				"ranges":  [][]map[string]string{{{"subnet": testPodSubnet4}}, {{"subnet": testPodSubnet6}}},
				"dataDir": filepath.Join(h.RunDir(), "cni-ipam"),
			},
		}},
	})
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(h.CNIConfDir(), "10-probed-test.conflist")
	if err := os.WriteFile(path, conf, 0o600); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = os.Remove(path)
		if out, err := exec.Command("ip", "link", "delete", bridge).CombinedOutput(); err != nil {
			t.Logf("ip link delete %s: %v %s", bridge, err, out)
		}
	})
	poll(t, "the runtime's pod network ready", 15*time.Second, func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		st, err := h.CRI().Status(ctx, &runtimeapi.StatusRequest{})
		if err != nil {
			return false
		}
		for _, c := range st.GetStatus().GetConditions() {
			if c.GetType() == runtimeapi.NetworkReady {
				return c.GetStatus()
			}
		}
		return false
	})
}

func ownerOf(c *ctrd.Container) cri.Owner {
	return cri.Owner{PodNamespace: c.PodNamespace, PodName: c.PodName, PodUID: c.PodUID, Container: c.Name}
}

// TestSandboxIPs (issue 30, item 4): each client reads from the real
// runtime the IPs its network plugin gave a pod's sandbox, the IPs the
// kubelet writes into status.podIPs: CRI from PodSandboxStatus, the native
// client from the CRI plugin's record of the sandbox. It answers for the
// pod's own container only, and a sandbox on the host network has none.
func TestSandboxIPs(t *testing.T) {
	h := need(t)
	podNetwork(t, h)
	netted := newContainer(t, ctrd.ContainerSpec{Name: "app", Command: idleCommand, PodNetwork: true})
	hostNet := newContainer(t, ctrd.ContainerSpec{Name: "hostnet", Command: idleCommand})

	// What the runtime says through the harness's own CRI connection.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	sb, err := h.CRI().PodSandboxStatus(ctx, &runtimeapi.PodSandboxStatusRequest{PodSandboxId: netted.PodSandboxID})
	if err != nil {
		t.Fatal(err)
	}
	want := []string{sb.GetStatus().GetNetwork().GetIp()}
	for _, a := range sb.GetStatus().GetNetwork().GetAdditionalIps() {
		want = append(want, a.GetIp())
	}
	for i, subnet := range []string{testPodSubnet4, testPodSubnet6} {
		if i >= len(want) {
			t.Fatalf("the sandbox has IPs %v; want one in each of %s and %s", want, testPodSubnet4, testPodSubnet6)
		}
		a, err := netip.ParseAddr(want[i])
		if err != nil || !netip.MustParsePrefix(subnet).Contains(a) {
			t.Fatalf("the sandbox's IP %q is not in %s (%v)", want[i], subnet, err)
		}
	}

	forEachImpl(t, func(t *testing.T, rt cri.Runtime) {
		v, err := decorator.NewVerified(rt, nil)
		if err != nil {
			t.Fatal(err)
		}
		l := decorator.NewLimited(v, 1, nil)
		got, err := l.SandboxIPs(cri.WithOwner(context.Background(), ownerOf(netted)), netted.RuntimeID())
		if err != nil || !slices.Equal(got, want) {
			t.Errorf("SandboxIPs = %v, %v; want the runtime's %v", got, err, want)
		}
		if got, err := l.SandboxIPs(cri.WithOwner(context.Background(), ownerOf(hostNet)), hostNet.RuntimeID()); err != nil || len(got) != 0 {
			t.Errorf("a host-network sandbox: %v, %v; want no IPs", got, err)
		}
		// A status naming another pod's container gets no IPs.
		var mismatch *cri.OwnerMismatchError
		if got, err := l.SandboxIPs(cri.WithOwner(context.Background(), ownerOf(hostNet)), netted.RuntimeID()); !errors.As(err, &mismatch) || got != nil {
			t.Errorf("another pod's container: %v, %v; want an *OwnerMismatchError", got, err)
		}
	})
}
