package manager

import (
	"context"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"testing"

	v1 "k8s.io/api/core/v1"

	"github.com/probed-dev/probed/pkg/cri"
	"github.com/probed-dev/probed/pkg/hostpolicy"
	"github.com/probed-dev/probed/pkg/prober"
	"github.com/probed-dev/probed/pkg/worker"
)

// fakeSandboxIPs is the runtime's answer per container ID.
type fakeSandboxIPs struct {
	mu     sync.Mutex
	ips    map[string][]string
	owners []cri.Owner
}

func (f *fakeSandboxIPs) SandboxIPs(ctx context.Context, containerID string) ([]string, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if o, ok := cri.OwnerFrom(ctx); ok {
		f.owners = append(f.owners, o)
	}
	ips, ok := f.ips[containerID]
	if !ok {
		return nil, cri.ErrContainerNotFound
	}
	return ips, nil
}

// spoofed are the addresses a writer of pods/status put in status.podIPs
// (issue 30, item 4): metadata, loopback, Azure's WireServer, AWS's IPv6
// metadata.
var spoofed = []string{"169.254.169.254", "127.0.0.1", "168.63.129.16", "fd00:ec2::254"}

func spoofedStatus(p *v1.Pod) {
	p.Status.PodIP = spoofed[0]
	p.Status.PodIPs = nil
	for _, ip := range spoofed {
		p.Status.PodIPs = append(p.Status.PodIPs, v1.PodIP{IP: ip})
	}
}

// firstTarget starts probing pod and returns the target of its first probe.
func firstTarget(t *testing.T, mutate func(*Options), pod *v1.Pod) prober.Target {
	t.Helper()
	tp := &targetProber{}
	e := newEnvWith(t, func(o *Options) { o.Prober = tp; mutate(o) })
	e.create(pod)
	e.eventually("a probe", func() bool {
		tp.mu.Lock()
		defer tp.mu.Unlock()
		return len(tp.targets) > 0
	})
	tp.mu.Lock()
	defer tp.mu.Unlock()
	return tp.targets[0]
}

// allows reports whether guard lets target's probe connect to addr, as
// the dialer decides right before connect(2); nothing is dialed.
func allows(guard *hostpolicy.Guard, target prober.Target, addr string) error {
	return prober.GuardedDialer(guard, target).ControlContext(context.Background(), "tcp",
		netip.AddrPortFrom(netip.MustParseAddr(addr), 80).String(), nil)
}

// Issue 30, item 4: status.podIPs that the runtime does not report for the
// pod's sandbox are not the pod's own, so the host policy does not exempt
// them; the runtime's IPs are, and it is asked about the probed container,
// for the worker's own pod and container.
func TestSpoofedStatusIPsAreNotThePods(t *testing.T) {
	for _, policy := range []hostpolicy.Policy{hostpolicy.DenyNodeLocal, hostpolicy.PodIPs} {
		t.Run(string(policy), func(t *testing.T) {
			guard := testGuard(policy)
			rt := &fakeSandboxIPs{ips: map[string][]string{"containerd://u1-app": {"10.1.0.5"}}}
			pod := runningPod("p", "u1", annotate(map[string]map[string]any{"app": {"readinessProbe": tcp1}}), "app")
			spoofedStatus(pod)
			got := firstTarget(t, func(o *Options) { o.HostGuard, o.SandboxIPs = guard, rt }, pod)
			for _, ip := range spoofed {
				if err := allows(guard, got, ip); !hostpolicy.IsRefused(err) {
					t.Errorf("spoofed pod IP %s: %v; want refused (target %+v)", ip, err, got)
				}
			}
			if err := allows(guard, got, "10.1.0.5"); err != nil {
				t.Errorf("the sandbox's IP: %v", err)
			}
			rt.mu.Lock()
			defer rt.mu.Unlock()
			if len(rt.owners) == 0 || rt.owners[0] != (cri.Owner{PodNamespace: "ns", PodName: "p", PodUID: "u1", Container: "app"}) {
				t.Errorf("the runtime was asked for %+v; want the worker's own pod and container", rt.owners)
			}
		})
	}
}

// Where no runtime can say (--runtime-type=none), or it cannot answer for
// the container, no status IP is the pod's own.
func TestNoRuntimeNoOwnIPs(t *testing.T) {
	for name, rt := range map[string]worker.SandboxIPSource{"no runtime": nil, "unknown container": &fakeSandboxIPs{}} {
		t.Run(name, func(t *testing.T) {
			guard := testGuard(hostpolicy.DenyNodeLocal)
			pod := runningPod("p", "u1", annotate(map[string]map[string]any{"app": {"readinessProbe": tcp1}}), "app")
			spoofedStatus(pod)
			got := firstTarget(t, func(o *Options) { o.HostGuard, o.SandboxIPs = guard, rt }, pod)
			for _, ip := range spoofed {
				if err := allows(guard, got, ip); !hostpolicy.IsRefused(err) {
					t.Errorf("pod IP %s: %v; want refused", ip, err)
				}
			}
		})
	}
}

// A hostNetwork pod's own IPs are the node's addresses only, at dial time
// and at sync time.
func TestHostNetworkPodIPMustBeTheNodes(t *testing.T) {
	guard := testGuard(hostpolicy.DenyNodeLocal) // the node is 10.9.9.9
	pod := runningPod("p", "u1", annotate(map[string]map[string]any{
		"app":   {"readinessProbe": tcp1},
		"other": {"readinessProbe": httpHost("169.254.169.254"), "livenessProbe": httpHost("10.9.9.9")},
	}), "app", "other")
	pod.Spec.HostNetwork = true
	pod.Status.PodIP = "169.254.169.254"
	pod.Status.PodIPs = []v1.PodIP{{IP: "169.254.169.254"}, {IP: "10.9.9.9"}}
	tp := &targetProber{}
	e := newEnvWith(t, func(o *Options) { o.Prober, o.HostGuard = tp, guard })
	e.create(pod)
	e.eventually("a probe of app", func() bool {
		tp.mu.Lock()
		defer tp.mu.Unlock()
		return slices.ContainsFunc(tp.targets, func(t prober.Target) bool { return t.ContainerID == "containerd://u1-app" })
	})
	tp.mu.Lock()
	i := slices.IndexFunc(tp.targets, func(t prober.Target) bool { return t.ContainerID == "containerd://u1-app" })
	got := tp.targets[i]
	tp.mu.Unlock()
	if err := allows(guard, got, "169.254.169.254"); !hostpolicy.IsRefused(err) {
		t.Errorf("a hostNetwork pod's status IP 169.254.169.254: %v; want refused", err)
	}
	if err := allows(guard, got, "10.9.9.9"); err != nil {
		t.Errorf("a hostNetwork pod's own IP, the node's: %v", err)
	}
	e.eventually("an InvalidProbe for the metadata host", func() bool { return e.rec.count(ReasonInvalidProbe) == 1 })
	if m := e.rec.messages(ReasonInvalidProbe)[0]; !strings.Contains(m, `container "other" readinessProbe: httpGet.host: Forbidden: 169.254.169.254 is link-local/metadata`) {
		t.Errorf("event %q", m)
	}
	if w := e.workers(); w["p/other/Liveness"] == "" {
		t.Errorf("workers %v: the probe of the node's own address, the pod's, should run", w)
	}
}

// --trust-pod-status-ips restores the old rule: status.podIPs and the pod
// IP are the pod's own, as written, and the runtime is not asked.
func TestTrustPodStatusIPs(t *testing.T) {
	guard := testGuard(hostpolicy.DenyNodeLocal)
	rt := &fakeSandboxIPs{ips: map[string][]string{"containerd://u1-app": {"10.1.0.5"}}}
	pod := runningPod("p", "u1", annotate(map[string]map[string]any{"app": {"readinessProbe": tcp1}}), "app")
	spoofedStatus(pod)
	got := firstTarget(t, func(o *Options) { o.HostGuard, o.SandboxIPs, o.TrustPodStatusIPs = guard, rt, true }, pod)
	for _, ip := range spoofed {
		if err := allows(guard, got, ip); err != nil {
			t.Errorf("pod IP %s with --trust-pod-status-ips: %v; want allowed", ip, err)
		}
	}
	if !slices.Equal(got.PodIPs, spoofed) || got.PodIPsVerified {
		t.Errorf("target %+v; want status.podIPs as written, not verified", got)
	}
	rt.mu.Lock()
	defer rt.mu.Unlock()
	if len(rt.owners) != 0 {
		t.Errorf("the runtime was asked %d times", len(rt.owners))
	}
}

// The worker fills Target.PodIPs from the pod it probes, and the manager's
// OwnIPs verifies those against the runtime without reading the pod again:
// a pod the cache no longer holds (deleted while its probe ran) is judged by
// the same rule, never by status IPs taken as written.
func TestOwnIPsVerifiesTheWorkersIPs(t *testing.T) {
	rt := &fakeSandboxIPs{ips: map[string][]string{"containerd://u1-app": {"10.1.0.5"}}}
	tp := &targetProber{}
	e := newEnvWith(t, func(o *Options) { o.Prober, o.HostGuard, o.SandboxIPs = tp, testGuard(hostpolicy.DenyNodeLocal), rt })
	for _, tc := range []struct {
		name        string
		hostNetwork bool
		want        []string
	}{
		{"sandbox", false, []string{"10.1.0.5"}},
		{"hostNetwork", true, []string{"10.9.9.9"}}, // the node's own address, testGuard's
	} {
		t.Run(tc.name, func(t *testing.T) {
			pod := &v1.Pod{Spec: v1.PodSpec{HostNetwork: tc.hostNetwork}}
			pod.Namespace, pod.Name, pod.UID = "ns", "p", "u1"
			statusIPs := append(slices.Clone(spoofed), "10.9.9.9")
			got := e.mgr.ownIPs.Narrow(context.Background(), pod, statusIPs, "containerd://u1-app")
			if !slices.Equal(got, tc.want) || e.mgr.ownIPs.TrustStatus {
				t.Errorf("PodIPs %v, verified %v; want %v, verified", got, !e.mgr.ownIPs.TrustStatus, tc.want)
			}
		})
	}
}
