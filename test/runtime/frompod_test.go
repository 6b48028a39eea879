//go:build runtime

package runtimetest

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/probed-dev/probed/pkg/cri"
	"github.com/probed-dev/probed/pkg/cri/decorator"
	"github.com/probed-dev/probed/pkg/hostpolicy"
	"github.com/probed-dev/probed/pkg/netns"
	"github.com/probed-dev/probed/pkg/netns/netnstest"
	"github.com/probed-dev/probed/pkg/prober"
	"github.com/probed-dev/probed/pkg/probespec"
	"github.com/probed-dev/probed/pkg/results"
	"github.com/probed-dev/probed/pkg/worker"
	ctrd "github.com/probed-dev/probed/test/harness/containerd"
	"github.com/probed-dev/probed/test/harness/proc"
)

// The ports the pod's servers listen on, on its loopback only.
const (
	localHTTPPort = 8080 // busybox httpd, in the container
	localGRPCPort = 9090 // probe-target's gRPC health server, in the pod's network namespace
)

// localOnlyPod runs a pod on the test pod network whose container serves
// HTTP (busybox httpd: /healthz) on 127.0.0.1 only, and, in the same
// network namespace, probe-target's gRPC health server on 127.0.0.1 only
// (busybox has no gRPC). It returns the container, the sandbox's IPs and
// the directory the runtime keeps pods' network namespaces in (the test
// runtime's state dir: netns_mounts_under_state_dir, probed's
// --pod-netns-dir).
func localOnlyPod(t *testing.T, h *ctrd.Containerd, meta ctrd.PodMeta, probeTarget string) (*ctrd.Container, []string, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cs, err := h.RunPod(ctx, meta, ctrd.ContainerSpec{Name: "app", PodNetwork: true, Command: []string{"sh", "-c",
		fmt.Sprintf(`mkdir -p /tmp/www && echo ok > /tmp/www/healthz && exec httpd -f -p 127.0.0.1:%d -h /tmp/www`, localHTTPPort)}})
	if err != nil {
		t.Fatal(err)
	}
	c := cs[0]
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		_ = h.RemovePod(ctx, c.PodSandboxID) // a test may have removed it
	})
	sb, err := h.CRI().PodSandboxStatus(ctx, &runtimeapi.PodSandboxStatusRequest{PodSandboxId: c.PodSandboxID, Verbose: true})
	if err != nil {
		t.Fatal(err)
	}
	ips := []string{sb.GetStatus().GetNetwork().GetIp()}
	for _, a := range sb.GetStatus().GetNetwork().GetAdditionalIps() {
		ips = append(ips, a.GetIp())
	}
	var info struct {
		RuntimeSpec struct {
			Linux struct {
				Namespaces []struct{ Type, Path string } `json:"namespaces"`
			} `json:"linux"`
		} `json:"runtimeSpec"`
	}
	if err := json.Unmarshal([]byte(sb.GetInfo()["info"]), &info); err != nil {
		t.Fatal(err)
	}
	var path string
	for _, ns := range info.RuntimeSpec.Linux.Namespaces {
		if ns.Type == "network" {
			path = ns.Path
		}
	}
	if path == "" {
		t.Fatal("the runtime names no network namespace for the sandbox")
	}
	srv := exec.Command("nsenter", "--net="+path, probeTarget, "--http=", fmt.Sprintf("--grpc=127.0.0.1:%d", localGRPCPort))
	srv.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = srv.Process.Kill(); _ = srv.Wait() })
	return c, ips, filepath.Dir(path)
}

// localProbes are the three network probes of the local-only pod.
func localProbes() map[string]*v1.Probe {
	return map[string]*v1.Probe{
		"http": {TimeoutSeconds: 2, ProbeHandler: v1.ProbeHandler{HTTPGet: &v1.HTTPGetAction{Path: "/healthz", Port: intstr.FromInt(localHTTPPort), Scheme: v1.URISchemeHTTP}}},
		"tcp":  {TimeoutSeconds: 2, ProbeHandler: v1.ProbeHandler{TCPSocket: &v1.TCPSocketAction{Port: intstr.FromInt(localHTTPPort)}}},
		"grpc": {TimeoutSeconds: 1, ProbeHandler: v1.ProbeHandler{GRPC: &v1.GRPCAction{Port: localGRPCPort}}},
	}
}

// Issue 36: an app that listens only on the pod's loopback, in a real
// containerd sandbox. A probe from the node fails, as under the kubelet;
// the same probe sent from inside the pod (probed.io/from Pod), through
// the namespace the runtime names for the pod's own container, succeeds:
// HTTP, TCP and gRPC, on both runtime clients. Many of them at once,
// beside probes from the node, leave no thread of the process in a pod's
// namespace.
func TestProbeFromInsidePod(t *testing.T) {
	h := need(t)
	podNetwork(t, h)
	probeTarget := proc.BuildTB(t, "./test/workloads/probe-target", proc.BuildOptions{})
	c, ips, dir := localOnlyPod(t, h, ctrd.PodMeta{Namespace: "probed-test", Name: "local-only", UID: "uid-local-only"}, probeTarget)
	// The node reaches the pod network only through the test's bridge:
	// give it an address, so that a probe from the node to the pod's IP
	// stays on this machine (the bridge has none, and such a probe would
	// otherwise follow the default route out).
	bridgeAddr(t, fmt.Sprintf("prt%d", os.Getpid()%1000000), "10.250.30.254/24")
	guard := hostpolicy.NewGuard(hostpolicy.DenyNodeLocal, hostpolicy.GuardOptions{})
	p := prober.New(nil, prober.Options{UserAgent: prober.NewUserAgent("1.37"), HostGuard: guard})

	forEachImpl(t, func(t *testing.T, rt cri.Runtime) {
		v, err := decorator.NewVerified(rt, nil)
		if err != nil {
			t.Fatal(err)
		}
		networks := &worker.PodNetworks{Sandbox: decorator.NewLimited(v, 4, nil), Dirs: []string{dir}}
		ctx := cri.WithOwner(context.Background(), ownerOf(c))
		var cache worker.PodNetns
		defer cache.Close()
		var mu sync.Mutex
		target := func(fromPod bool) prober.Target {
			return prober.Target{PodIP: ips[0], PodIPs: ips, PodIPsVerified: true, ContainerID: c.RuntimeID(), FromPod: fromPod,
				PodNetns: func(ctx context.Context) (*netns.NS, error) {
					mu.Lock()
					defer mu.Unlock()
					return cache.Get(ctx, networks, c.RuntimeID())
				}}
		}
		for name, spec := range localProbes() {
			res, out, err := p.Probe(ctx, probespec.Readiness, spec, target(false), nil)
			want := "connection refused" // grpc-go retries a refused port until the timeout
			if name == "grpc" {
				want = "failed to connect service"
			}
			if res == results.Success || !strings.Contains(out, want) {
				t.Errorf("%s from the node: %s %q %v; want the kubelet's failure, %q (the app listens on 127.0.0.1 only)", name, res, out, err, want)
			}
			if res, out, err := untilSuccess(func() (results.Result, string, error) {
				return p.Probe(ctx, probespec.Readiness, spec, target(true), nil)
			}); res != results.Success || err != nil {
				t.Errorf("%s from inside the pod: %s %q %v; want success", name, res, out, err)
			}
		}

		// Many at once, beside probes from the node to a server on the
		// node's loopback.
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		defer func() { _ = l.Close() }()
		go func() {
			for {
				conn, err := l.Accept()
				if err != nil {
					return
				}
				_ = conn.Close()
			}
		}()
		nodePort := l.Addr().(*net.TCPAddr).Port
		nodeProbe := &v1.Probe{TimeoutSeconds: 2, ProbeHandler: v1.ProbeHandler{TCPSocket: &v1.TCPSocketAction{Port: intstr.FromInt(nodePort)}}}
		specs := localProbes()
		var wg sync.WaitGroup
		errs := make(chan string, 64)
		for g := range 8 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				s := prober.NewSession()
				defer s.Close()
				for i := range 20 {
					spec, tg := nodeProbe, prober.Target{PodIP: "127.0.0.1", PodIPs: []string{"127.0.0.1"}, PodIPsVerified: true}
					switch (g + i) % 4 {
					case 0:
						spec, tg = specs["http"], target(true)
					case 1:
						spec, tg = specs["tcp"], target(true)
					case 2:
						spec, tg = specs["grpc"], target(true)
					}
					tg.Session = s
					if res, out, err := p.Probe(ctx, probespec.Readiness, spec, tg, nil); res != results.Success {
						errs <- fmt.Sprintf("%s %q %v", res, out, err)
					}
				}
			}()
		}
		wg.Wait()
		close(errs)
		for e := range errs {
			t.Errorf("a probe failed: %s", e)
		}
		if out, err := netnstest.ThreadsOutside(); err != nil || len(out) > 0 {
			t.Errorf("threads outside the process's own network namespace: %v %v", out, err)
		}
	})
}

// Issue 36: a sandbox replaced under a running worker (the kubelet
// re-creates it after a reboot or a runtime crash: a new namespace, new
// container IDs). The worker's namespace follows the new container ID;
// the old one's is gone with its container.
func TestProbeFromInsidePodFollowsTheSandbox(t *testing.T) {
	h := need(t)
	podNetwork(t, h)
	probeTarget := proc.BuildTB(t, "./test/workloads/probe-target", proc.BuildOptions{})
	p := prober.New(nil, prober.Options{UserAgent: prober.NewUserAgent("1.37")})
	spec := localProbes()["http"]

	forEachImpl(t, func(t *testing.T, rt cri.Runtime) {
		meta := ctrd.PodMeta{Namespace: "probed-test", Name: "replaced-" + cri.RuntimeName(rt), UID: "uid-replaced-" + cri.RuntimeName(rt)}
		first, ips, dir := localOnlyPod(t, h, meta, probeTarget)
		v, err := decorator.NewVerified(rt, nil)
		if err != nil {
			t.Fatal(err)
		}
		networks := &worker.PodNetworks{Sandbox: decorator.NewLimited(v, 4, nil), Dirs: []string{dir}}
		var cache worker.PodNetns // the worker's
		defer cache.Close()
		probe := func(c *ctrd.Container, ips []string) (results.Result, string, error) {
			ctx := cri.WithOwner(context.Background(), ownerOf(c))
			return p.Probe(ctx, probespec.Readiness, spec, prober.Target{PodIP: ips[0], PodIPs: ips, PodIPsVerified: true, ContainerID: c.RuntimeID(), FromPod: true,
				PodNetns: func(ctx context.Context) (*netns.NS, error) { return cache.Get(ctx, networks, c.RuntimeID()) }}, nil)
		}
		if res, out, err := untilSuccess(func() (results.Result, string, error) { return probe(first, ips) }); res != results.Success {
			t.Fatalf("first sandbox: %s %q %v", res, out, err)
		}
		before, _ := cache.Get(context.Background(), networks, first.RuntimeID())
		firstID := before.ID()

		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := h.RemovePod(ctx, first.PodSandboxID); err != nil {
			t.Fatal(err)
		}
		second, ips2, _ := localOnlyPod(t, h, meta, probeTarget)
		if res, out, err := untilSuccess(func() (results.Result, string, error) { return probe(second, ips2) }); res != results.Success {
			t.Fatalf("replaced sandbox: %s %q %v", res, out, err)
		}
		now, _ := cache.Get(context.Background(), networks, second.RuntimeID())
		if now.ID() == firstID {
			t.Errorf("still in the first sandbox's namespace %v", firstID)
		}
		// The old container ID names nothing any more: an error, never a
		// probe from elsewhere.
		var stale worker.PodNetns
		defer stale.Close()
		ctxOld := cri.WithOwner(context.Background(), ownerOf(first))
		if _, err := stale.Get(ctxOld, networks, first.RuntimeID()); err == nil || !strings.Contains(err.Error(), "probed.io/from Pod") {
			t.Errorf("the removed sandbox's container: %v; want an error", err)
		}
	})
}

// bridgeAddr puts addr on the test pod network's bridge until the test
// ends: the node then reaches the pods' IPs over the bridge.
func bridgeAddr(t *testing.T, bridge, addr string) {
	t.Helper()
	if out, err := exec.Command("ip", "addr", "add", addr, "dev", bridge).CombinedOutput(); err != nil {
		t.Fatalf("ip addr add %s dev %s: %v %s", addr, bridge, err, out)
	}
	t.Cleanup(func() { _ = exec.Command("ip", "addr", "del", addr, "dev", bridge).Run() })
}

// untilSuccess runs probe until it succeeds, for at most 10s, as a worker
// probes every period: the pod's servers start after its container does.
// It returns the last outcome.
func untilSuccess(probe func() (results.Result, string, error)) (results.Result, string, error) {
	deadline := time.Now().Add(10 * time.Second)
	for {
		res, out, err := probe()
		if res == results.Success || time.Now().After(deadline) {
			return res, out, err
		}
		time.Sleep(100 * time.Millisecond)
	}
}
