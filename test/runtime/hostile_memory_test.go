//go:build runtime

package runtimetest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	ctrd "github.com/probed-dev/probed/test/harness/containerd"
	"github.com/probed-dev/probed/test/harness/controlplane"
	"github.com/probed-dev/probed/test/harness/proc"
)

// shippedMemoryLimit is probed's memory limit in deploy/daemonset.yaml and
// the chart (its GOMEMLIMIT too).
const shippedMemoryLimit = 192 << 20

// TestHostilePodCannotRunProbedOutOfMemory (issue 30, item 2): the real
// probed binary, as it ships (no race detector, GOMEMLIMIT and a memory
// cgroup at its shipped 192 MiB), on a real kube-apiserver and containerd,
// probes two hostile pods beside a victim. Each hostile pod has eight exec
// probes that print 4 MB (four times what probed reads of an answer) and
// then hold on for a second, and eight HTTP probes whose server answers
// with 8.6 MiB of headers, all every second. The victim's exec readiness and HTTP liveness
// probes must run every period and pass, and probed must stay up with its
// peak RSS under the limit. Before the bounds, probed read each answer
// whole.
func TestHostilePodCannotRunProbedOutOfMemory(t *testing.T) {
	h := need(t)
	ctx := context.Background()
	t0 := time.Now()
	cp := startControlPlane(t)
	t.Logf("control plane up after %v", time.Since(t0))
	bin := proc.BuildTB(t, "./cmd/probed", proc.BuildOptions{Shipped: true})
	t.Logf("probed built after %v", time.Since(t0))
	client := cp.Client()
	const ns, node = "hostile-mem", "node-hostile-mem"
	if _, err := cp.CreateNode(ctx, node); err != nil {
		t.Fatal(err)
	}
	if err := cp.EnsureNamespace(ctx, ns); err != nil {
		t.Fatal(err)
	}

	good := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("ok")) }))
	t.Cleanup(good.Close)
	bomb := headerBombServer(t, 8600<<10)

	every := func(p map[string]any) map[string]any {
		p["periodSeconds"], p["timeoutSeconds"] = 1, 10
		return p
	}
	spew := func() map[string]any {
		return every(map[string]any{"exec": map[string]any{"command": []string{"sh", "-c", "head -c 4000000 /dev/zero; sleep 1"}}})
	}
	bombed := func() map[string]any {
		return every(map[string]any{"httpGet": map[string]any{"path": "/", "port": bomb}})
	}
	hostile := map[string]any{}
	for i := range 4 {
		hostile[fmt.Sprintf("x%d", i)] = map[string]any{"readinessProbe": spew(), "livenessProbe": spew()}
		hostile[fmt.Sprintf("w%d", i)] = map[string]any{"readinessProbe": bombed(), "livenessProbe": bombed()}
	}
	_, goodPort, _ := net.SplitHostPort(good.Listener.Addr().String())
	gp, _ := strconv.Atoi(goodPort)
	victim := map[string]any{"app": map[string]any{
		// On two busy cores, runc may take over a second to start even
		// `true` while the hostile pods' execs run: a timeout to match.
		"readinessProbe": map[string]any{"exec": map[string]any{"command": []string{"true"}}, "periodSeconds": 1, "timeoutSeconds": 5},
		"livenessProbe":  map[string]any{"httpGet": map[string]any{"path": "/", "port": gp}, "periodSeconds": 1},
	}}
	for i := range 2 {
		runAPIPod(t, client, h, node, ns, fmt.Sprintf("hostile-%d", i), hostile)
	}
	runAPIPod(t, client, h, node, ns, "victim", victim)

	t.Logf("pods running after %v", time.Since(t0))
	p := startProbedInMemoryLimit(t, bin, []string{
		"--kubeconfig=" + cp.KubeconfigPath, "--node-name=" + node,
		"--runtime-endpoint=" + h.Endpoint(),
		"--probe-host-policy=kubelet", "--liveness-action=event-only", "--probe-reach-policy=",
		"-v=1",
	})

	// Past start-up: the victim's probes have run.
	poll(t, "the victim's first probes", time.Minute, func() bool {
		return len(p.victimHistory(t, "Readiness")) > 0 && len(p.victimHistory(t, "Liveness")) > 0
	})
	t.Logf("probing after %v", time.Since(t0))
	const window = 15 * time.Second
	start := time.Now()
	seen := map[string]map[string]historyEntry{"Readiness": {}, "Liveness": {}}
	for time.Since(start) < window {
		if done, err := p.proc.Exited(); done {
			t.Fatalf("probed exited under the hostile pod after %v: %v; peak RSS %d MiB%s", time.Since(start).Round(time.Second), err, p.peakRSS()>>20, p.cgroupReport())
		}
		for typ, m := range seen {
			for _, e := range p.victimHistory(t, typ) {
				if e.Time.After(start) {
					m[e.Time.String()] = e
				}
			}
		}
		time.Sleep(time.Second)
	}
	hwm := p.status("VmHWM")
	t.Logf("probed under a hostile pod for %v: peak RSS %d MiB (VmHWM), sampled peak %d MiB, limit %d MiB%s",
		window, hwm>>20, p.peakRSS()>>20, shippedMemoryLimit>>20, p.cgroupReport())
	if hwm >= shippedMemoryLimit {
		t.Errorf("peak RSS %d MiB, at or over the shipped limit of %d MiB", hwm>>20, shippedMemoryLimit>>20)
	}
	if done, err := p.proc.Exited(); done {
		t.Fatalf("probed exited: %v", err)
	}
	// A period of 1 s; a loaded machine may make a probe late, not skip
	// most of them.
	for typ, m := range seen {
		bad := 0
		for _, e := range m {
			if e.Result != "success" || e.Error != "" {
				bad++
				t.Errorf("victim %s probe at %v: %s %q %q", typ, e.Time, e.Result, e.Output, e.Error)
			}
		}
		t.Logf("victim %s probe: %d results in %v, %d not passed", typ, len(m), window, bad)
		if len(m) < int(window/time.Second)*2/3 {
			t.Errorf("victim %s probe ran %d times in %v at a 1 s period", typ, len(m), window)
		}
	}
	// The hostile probes did run, and failed on the bounds.
	for _, want := range []string{"exceed the 1 MiB probed reads of an exec's answer", "server response headers exceeded 32768 bytes"} {
		if !p.anyHistorySays(t, "hostile-", want) {
			t.Errorf("no hostile probe failed saying %q", want)
		}
	}
}

// startControlPlane starts etcd and kube-apiserver for one test.
func startControlPlane(t *testing.T) *controlplane.ControlPlane {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cp, err := controlplane.Start(ctx, controlplane.Options{})
	if errors.Is(err, controlplane.ErrBinaryMissing) {
		t.Skipf("skipping: %v (hack/build-k8s.sh kube-apiserver)", err)
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cp.Stop() })
	return cp
}

// headerBombServer answers every request with 200 and n bytes of headers.
func headerBombServer(t *testing.T, n int) int {
	t.Helper()
	var head strings.Builder
	head.WriteString("HTTP/1.1 200 OK\r\n")
	for i := 0; head.Len() < n; i++ {
		fmt.Fprintf(&head, "X-Pad-%d: %s\r\n", i, strings.Repeat("p", 1000))
	}
	head.WriteString("Content-Length: 2\r\n\r\nok")
	raw := []byte(head.String())
	s := newHostileServer(t, func(c net.Conn) {
		if readRequestHead(c) != nil {
			return
		}
		_, _ = c.Write(raw)
	})
	return s.port
}

// runAPIPod creates pod name on node with the containers probes names,
// runs them in containerd under the API pod's identity, and sets the
// pod's status as the kubelet would.
func runAPIPod(t *testing.T, client kubernetes.Interface, h *ctrd.Containerd, node, ns, name string, probes map[string]any) {
	t.Helper()
	ctx := context.Background()
	annotation, err := json.Marshal(probes)
	if err != nil {
		t.Fatal(err)
	}
	pod := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Annotations: map[string]string{"probed.io/probes": string(annotation)}},
		Spec: v1.PodSpec{NodeName: node}}
	var specs []ctrd.ContainerSpec
	for c := range probes {
		pod.Spec.Containers = append(pod.Spec.Containers, v1.Container{Name: c, Image: "busybox"})
		specs = append(specs, ctrd.ContainerSpec{Name: c, Command: idleCommand})
	}
	pod, err = client.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	cctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	cs, err := h.RunPod(cctx, ctrd.PodMeta{Namespace: ns, Name: name, UID: string(pod.UID)}, specs...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := h.RemovePod(ctx, cs[0].PodSandboxID); err != nil {
			t.Errorf("remove pod %s: %v", name, err)
		}
	})
	now := metav1.Now()
	pod.Status = v1.PodStatus{Phase: v1.PodRunning, PodIP: "127.0.0.1", PodIPs: []v1.PodIP{{IP: "127.0.0.1"}}, HostIP: "127.0.0.1", StartTime: &now}
	started := true
	for _, c := range cs {
		pod.Status.ContainerStatuses = append(pod.Status.ContainerStatuses, v1.ContainerStatus{
			Name: c.Name, Image: "busybox", ImageID: "sha256:0", ContainerID: c.RuntimeID(), Started: &started,
			State: v1.ContainerState{Running: &v1.ContainerStateRunning{StartedAt: now}},
		})
	}
	if _, err := client.CoreV1().Pods(ns).UpdateStatus(ctx, pod, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// limitedProbed is a probed process in a memory cgroup of its own.
type limitedProbed struct {
	proc    *proc.Daemon
	addr    string
	cgroup  string // "" without cgroup v1's memory controller
	mu      sync.Mutex
	peak    int64
	stopped chan struct{}
}

// startProbedInMemoryLimit runs bin with args, --metrics-bind-address on
// loopback (plain HTTP), GOMEMLIMIT and, where cgroup v1's memory
// controller is there, a memory cgroup, both at the shipped limit; it
// samples the process's RSS until the test ends.
func startProbedInMemoryLimit(t *testing.T, bin string, args []string) *limitedProbed {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &limitedProbed{addr: ln.Addr().String(), cgroup: memoryCgroup(t, shippedMemoryLimit), stopped: make(chan struct{})}
	_ = ln.Close()
	args = append(args, "--metrics-bind-address="+p.addr, "--metrics-insecure-serving")
	env := append(os.Environ(), fmt.Sprintf("GOMEMLIMIT=%dMiB", shippedMemoryLimit>>20), "GOGC=50")
	cmd, cmdArgs := bin, args
	if p.cgroup != "" {
		// The shell joins the cgroup, then becomes probed: no allocation
		// of probed's happens outside it.
		cmd, cmdArgs = "/bin/sh", append([]string{"-c", `echo $$ > "$0/cgroup.procs" && exec "$@"`, p.cgroup, bin}, args...)
	}
	p.proc = proc.StartDaemon(t, "probed", cmd, cmdArgs, proc.DaemonOptions{Env: env})
	go p.sample()
	t.Cleanup(func() { close(p.stopped) }) // before the daemon's own clean-up
	poll(t, "probed's /healthz", time.Minute, func() bool {
		resp, err := http.Get("http://" + p.addr + "/healthz")
		if err != nil {
			return false
		}
		_ = resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	})
	return p
}

func (p *limitedProbed) sample() {
	for {
		select {
		case <-p.stopped:
			return
		case <-time.After(100 * time.Millisecond):
		}
		rss := p.status("VmRSS")
		p.mu.Lock()
		p.peak = max(p.peak, rss)
		p.mu.Unlock()
	}
}

func (p *limitedProbed) peakRSS() int64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.peak
}

// status is a field of the process's /proc status, in bytes.
func (p *limitedProbed) status(name string) int64 {
	return procStatus(strconv.Itoa(p.proc.PID()), name)
}

// procStatus is a "Name: N kB" field of /proc/<pid>/status, in bytes.
func procStatus(pid, name string) int64 {
	b, _ := os.ReadFile("/proc/" + pid + "/status")
	for _, l := range strings.Split(string(b), "\n") {
		if f := strings.Fields(l); len(f) >= 2 && f[0] == name+":" {
			kb, _ := strconv.ParseInt(f[1], 10, 64)
			return kb << 10
		}
	}
	return 0
}

// cgroupReport is the cgroup's peak usage and OOM kills, if there is one.
func (p *limitedProbed) cgroupReport() string {
	if p.cgroup == "" {
		return " (no memory cgroup: GOMEMLIMIT only)"
	}
	read := func(f string) string {
		b, _ := os.ReadFile(filepath.Join(p.cgroup, f))
		return strings.TrimSpace(string(b))
	}
	peak, _ := strconv.ParseInt(read("memory.max_usage_in_bytes"), 10, 64)
	kills := "?"
	for _, l := range strings.Split(read("memory.oom_control"), "\n") {
		if v, ok := strings.CutPrefix(l, "oom_kill "); ok {
			kills = v
		}
	}
	return fmt.Sprintf("; memory cgroup at %d MiB: peak usage %d MiB, OOM kills %s", shippedMemoryLimit>>20, peak>>20, kills)
}

// memoryCgroup makes a cgroup v1 memory cgroup limited to limit bytes,
// removed when the test ends; "" where there is no such controller.
func memoryCgroup(t *testing.T, limit int64) string {
	t.Helper()
	base := "/sys/fs/cgroup/memory"
	if _, err := os.Stat(filepath.Join(base, "memory.limit_in_bytes")); err != nil {
		return ""
	}
	dir := filepath.Join(base, fmt.Sprintf("probed-test-mem-%d", os.Getpid()))
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Logf("no memory cgroup (%v): GOMEMLIMIT only", err)
		return ""
	}
	// Registered first: it runs after the process is stopped.
	t.Cleanup(func() {
		for range 50 {
			if err := os.Remove(dir); err == nil || os.IsNotExist(err) {
				return
			}
			time.Sleep(100 * time.Millisecond)
		}
		t.Errorf("memory cgroup %s left behind", dir)
	})
	if err := os.WriteFile(filepath.Join(dir, "memory.limit_in_bytes"), []byte(strconv.FormatInt(limit, 10)), 0o644); err != nil {
		t.Fatal(err)
	}
	return dir
}

// historyEntry is one /debug/probes history entry.
type historyEntry struct {
	Time   time.Time `json:"time"`
	Result string    `json:"result"`
	Output string    `json:"output"`
	Error  string    `json:"error"`
}

type debugWorker struct {
	PodName   string         `json:"podName"`
	ProbeType string         `json:"probeType"`
	History   []historyEntry `json:"history"`
}

func (p *limitedProbed) debugProbes(t *testing.T) []debugWorker {
	t.Helper()
	resp, err := http.Get("http://" + p.addr + "/debug/probes")
	if err != nil {
		return nil
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	var out []debugWorker
	if err := json.Unmarshal(b, &out); err != nil {
		t.Logf("/debug/probes: %v", err)
	}
	return out
}

// victimHistory is the victim's history for one probe type.
func (p *limitedProbed) victimHistory(t *testing.T, typ string) []historyEntry {
	for _, w := range p.debugProbes(t) {
		if w.PodName == "victim" && w.ProbeType == typ {
			return w.History
		}
	}
	return nil
}

// anyHistorySays reports whether any probe of a pod named with prefix
// recorded text.
func (p *limitedProbed) anyHistorySays(t *testing.T, prefix, text string) bool {
	for _, w := range p.debugProbes(t) {
		for _, e := range w.History {
			if strings.HasPrefix(w.PodName, prefix) && (strings.Contains(e.Output, text) || strings.Contains(e.Error, text)) {
				return true
			}
		}
	}
	return false
}
