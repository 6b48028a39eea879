package decorator

import (
	"context"
	"errors"
	"slices"
	"testing"

	"github.com/probed-dev/probed/pkg/cri/internal/dial"
	"github.com/probed-dev/probed/pkg/cri/internal/execout"
	"github.com/probed-dev/probed/pkg/cri/none"
	"github.com/probed-dev/probed/pkg/cri/runtimeservice"

	"github.com/probed-dev/probed/pkg/cri"
	"github.com/probed-dev/probed/pkg/cri/internal/critest"

	"google.golang.org/grpc"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// Issue 30, item 4: the runtime says which IPs a pod's sandbox has, for
// the pod's own container only, and is asked once per container.
func TestVerifiedSandboxIPs(t *testing.T) {
	rt := newLabeledNode()
	own := rt.containers[attackerID]
	own.SandboxIPs = []string{"10.1.0.5", "fd00::5"}
	rt.containers[attackerID] = own
	victim := rt.containers[victimID]
	victim.SandboxIPs = []string{"10.1.0.9"}
	rt.containers[victimID] = victim
	v, err := NewVerified(rt, nil)
	if err != nil {
		t.Fatal(err)
	}
	l := NewLimited(v, 1, nil)
	ctx := cri.WithOwner(context.Background(), attacker)
	for range 3 {
		ips, err := l.SandboxIPs(ctx, attackerID)
		if err != nil || !slices.Equal(ips, []string{"10.1.0.5", "fd00::5"}) {
			t.Fatalf("own container: %v %v", ips, err)
		}
	}
	if lookups, _, _ := rt.counts(attackerID); lookups != 1 {
		t.Errorf("%d lookups of one container; want 1", lookups)
	}
	var mismatch *cri.OwnerMismatchError
	if ips, err := l.SandboxIPs(ctx, victimID); !errors.As(err, &mismatch) || ips != nil {
		t.Errorf("another pod's container: %v %v; want an *cri.OwnerMismatchError and no IPs", ips, err)
	}
	if ips, err := l.SandboxIPs(context.Background(), attackerID); !errors.Is(err, cri.ErrNoOwner) || ips != nil {
		t.Errorf("no owner: %v %v", ips, err)
	}
	if _, err := NewLimited(none.None(), 1, nil).SandboxIPs(ctx, attackerID); !errors.Is(err, cri.ErrNoSandboxIPs) {
		t.Errorf("no runtime: %v; want cri.ErrNoSandboxIPs", err)
	}
}

// sandboxCRI answers ListContainers and PodSandboxStatus for one
// container in one sandbox with a network.
type sandboxCRI struct {
	critest.FakeCRI
	network *runtimeapi.PodSandboxNetworkStatus
	// info is the verbose answer's info, as containerd writes it.
	info map[string]string
}

func (s sandboxCRI) ListContainers(_ context.Context, r *runtimeapi.ListContainersRequest) (*runtimeapi.ListContainersResponse, error) {
	l := kubeletLabels("tenant", "web", "uid-web", "app")
	return &runtimeapi.ListContainersResponse{Containers: []*runtimeapi.Container{
		{Id: r.GetFilter().GetId(), PodSandboxId: "sb", Labels: l.Labels},
	}}, nil
}

func (s sandboxCRI) PodSandboxStatus(context.Context, *runtimeapi.PodSandboxStatusRequest) (*runtimeapi.PodSandboxStatusResponse, error) {
	l := kubeletLabels("tenant", "web", "uid-web", "app")
	return &runtimeapi.PodSandboxStatusResponse{Status: &runtimeapi.PodSandboxStatus{Id: "sb", Labels: l.SandboxLabels, Network: s.network}, Info: s.info}, nil
}

// Over CRI the IPs are PodSandboxStatus's network.ip and additional_ips.
func TestCRISandboxIPs(t *testing.T) {
	for _, tc := range []struct {
		name    string
		network *runtimeapi.PodSandboxNetworkStatus
		want    []string
	}{
		{"dual stack", &runtimeapi.PodSandboxNetworkStatus{Ip: "10.1.0.5", AdditionalIps: []*runtimeapi.PodIP{{Ip: "fd00::5"}}}, []string{"10.1.0.5", "fd00::5"}},
		{"host network", &runtimeapi.PodSandboxNetworkStatus{}, nil},
		{"no network status", nil, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			v := verifiedOverCRI(t, sandboxCRI{network: tc.network})
			ips, err := v.SandboxIPs(cri.WithOwner(context.Background(), attacker), "containerd://abc")
			if err != nil || !slices.Equal(ips, tc.want) {
				t.Errorf("SandboxIPs = %v, %v; want %v", ips, err, tc.want)
			}
		})
	}
}

// Issue 36: the runtime says where the pod's network namespace is and
// which runtime runs the sandbox, for the pod's own container only.
func TestVerifiedSandboxNetwork(t *testing.T) {
	rt := newLabeledNode()
	own := rt.containers[attackerID]
	own.SandboxIPs = []string{"10.1.0.5"}
	own.SandboxNetNS, own.SandboxRuntime = "/var/run/netns/cni-own", "io.containerd.runc.v2"
	rt.containers[attackerID] = own
	victim := rt.containers[victimID]
	victim.SandboxNetNS = "/var/run/netns/cni-victim"
	rt.containers[victimID] = victim
	v, err := NewVerified(rt, nil)
	if err != nil {
		t.Fatal(err)
	}
	l := NewLimited(v, 1, nil)
	ctx := cri.WithOwner(context.Background(), attacker)
	got, err := l.SandboxNetwork(ctx, attackerID)
	if err != nil || got.NetNS != "/var/run/netns/cni-own" || got.Runtime != "io.containerd.runc.v2" || !slices.Equal(got.IPs, []string{"10.1.0.5"}) {
		t.Fatalf("own container: %+v %v", got, err)
	}
	var mismatch *cri.OwnerMismatchError
	if got, err := l.SandboxNetwork(ctx, victimID); !errors.As(err, &mismatch) || got.NetNS != "" {
		t.Errorf("another pod's container: %+v %v; want an *cri.OwnerMismatchError and nothing", got, err)
	}
	if _, err := l.SandboxNetwork(context.Background(), attackerID); !errors.Is(err, cri.ErrNoOwner) {
		t.Errorf("no owner: %v", err)
	}
	if _, err := NewLimited(none.None(), 1, nil).SandboxNetwork(ctx, attackerID); !errors.Is(err, cri.ErrNoSandboxIPs) {
		t.Errorf("no runtime: %v; want cri.ErrNoSandboxIPs", err)
	}
}

// Over CRI the namespace and the runtime come from the verbose info.
func TestCRISandboxNetwork(t *testing.T) {
	info := map[string]string{"info": `{"pid": 42, "runtimeType": "io.containerd.kata.v2", "runtimeSpec": {"linux": {"namespaces": [
		{"type": "pid"}, {"type": "network", "path": "/var/run/netns/cni-1234"}, {"type": "ipc"}]}}}`}
	v := verifiedOverCRI(t, sandboxCRI{network: &runtimeapi.PodSandboxNetworkStatus{Ip: "10.1.0.5"}, info: info})
	got, err := v.SandboxNetwork(cri.WithOwner(context.Background(), attacker), "containerd://abc")
	if err != nil || got.NetNS != "/var/run/netns/cni-1234" || got.Runtime != "io.containerd.kata.v2" {
		t.Errorf("SandboxNetwork = %+v, %v", got, err)
	}
}

// verifiedOverCRI is Verified over the CRI client, against srv served on a
// unix socket until the test ends.
func verifiedOverCRI(t *testing.T, srv sandboxCRI) *Verified {
	t.Helper()
	sock := critest.Serve(t, func(s *grpc.Server) { runtimeapi.RegisterRuntimeServiceServer(s, srv) })
	conn, err := dial.Dial("unix://" + sock)
	if err != nil {
		t.Fatal(err)
	}
	rt := runtimeservice.New(conn, execout.NewBudget(0))
	t.Cleanup(func() { rt.Close() })
	v, err := NewVerified(rt, nil)
	if err != nil {
		t.Fatal(err)
	}
	return v
}
