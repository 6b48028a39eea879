//go:build e2e

package node

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/probed-dev/probed/test/harness/containerd"
	"github.com/probed-dev/probed/test/harness/controlplane"
	"github.com/probed-dev/probed/test/harness/repo"
)

// TestNode starts a node, runs a pod on the pod network, deploys probed from
// deploy/ and sees it probe a pod, then stops the node and checks that
// nothing is left: no process, mount, bridge, cgroup, run dir, or changed
// sysctl.
func TestNode(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	sysctlsBefore := readSysctls()

	start := time.Now()
	n, err := Start(ctx, Options{Logf: t.Logf})
	if errors.Is(err, controlplane.ErrBinaryMissing) || errors.Is(err, containerd.ErrMissingBinaries) {
		t.Skipf("skipping: %v", err)
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = n.Stop() })
	t.Logf("node Ready in %v; run dir %s, pod subnet %s", time.Since(start), n.RunDir, n.PodSubnet)

	// A pod on the pod network, reachable from the host as probed reaches it.
	start = time.Now()
	pod := runPod(ctx, t, n, &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "default"},
		Spec: corev1.PodSpec{
			TerminationGracePeriodSeconds: ptr(int64(1)),
			Containers: []corev1.Container{{
				Name: "web", Image: containerd.BusyboxImage, ImagePullPolicy: corev1.PullNever,
				Command: []string{"sh", "-c", "echo hello-from-web; mkdir -p /www && echo ok >/www/index.html && exec httpd -f -p 8080 -h /www"},
			}},
		},
	}, false)
	t.Logf("busybox pod Running at %s in %v", pod.Status.PodIP, time.Since(start))
	_, subnet, _ := net.ParseCIDR(n.PodSubnet)
	if ip := net.ParseIP(pod.Status.PodIP); ip == nil || !subnet.Contains(ip) {
		t.Errorf("pod IP %q is not in the pod subnet %s", pod.Status.PodIP, n.PodSubnet)
	}
	// Running is not listening: httpd binds its port a moment after the
	// container starts, so poll with a deadline.
	var body string
	err = wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 15*time.Second, true, func(ctx context.Context) (bool, error) {
		b, err := httpGet(ctx, "http://"+net.JoinHostPort(pod.Status.PodIP, "8080")+"/")
		body = b
		return err == nil, nil
	})
	if err != nil || strings.TrimSpace(body) != "ok" {
		t.Errorf("GET the pod from the host: %q, %v", body, err)
	}
	// Logs go apiserver -> kubelet: the kubelet's authn/authz work.
	logs, err := n.Client().CoreV1().Pods("default").GetLogs("web", &corev1.PodLogOptions{}).DoRaw(ctx)
	if err != nil || !strings.Contains(string(logs), "hello-from-web") {
		t.Errorf("pod logs: %q, %v", logs, err)
	}
	if kubectl, err := exec.LookPath("kubectl"); err == nil {
		// Stdout only: kubectl's websocket client may log a harmless
		// warning ("Unknown stream id 1") on stderr.
		cmd := exec.CommandContext(ctx, kubectl, "--kubeconfig", n.KubeconfigPath, "exec", "-n", "default", "web", "--",
			"cat", "/www/index.html")
		var stderr strings.Builder
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		if err != nil || strings.TrimSpace(string(out)) != "ok" {
			t.Errorf("kubectl exec: %q, %v; stderr: %q", out, err, stderr.String())
		}
	}

	// probed, from deploy/.
	root, err := repo.Root()
	if err != nil {
		t.Fatal(err)
	}
	archive := filepath.Join(root, ProbedImageArchive)
	if _, err := os.Stat(archive); err != nil {
		t.Fatalf("%v: run hack/build-probed-image.sh", err)
	}
	start = time.Now()
	if err := n.ImportImage(ctx, archive); err != nil {
		t.Fatal(err)
	}
	t.Logf("probed image imported in %v", time.Since(start))
	start = time.Now()
	if err := n.DeployProbed(ctx, ProbedImage); err != nil {
		t.Fatal(err)
	}
	t.Logf("probed deployed and Ready in %v", time.Since(start))
	name, err := n.ProbedPodName(ctx)
	if err != nil {
		t.Fatal(err)
	}
	probedPod, err := n.Client().CoreV1().Pods(n.ProbedNamespace()).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if !podReady(probedPod) {
		t.Errorf("probed pod %s is not Ready", name)
	}
	for _, path := range []string{"/readyz", "/healthz"} {
		if _, err := FetchProbed(ctx, n.ProbedMetricsURL()+path, ""); err != nil {
			t.Errorf("probed %s: %v", path, err)
		}
	}
	if _, err := FetchProbed(ctx, n.ProbedMetricsURL()+"/debug/probes", ""); err == nil || !strings.Contains(err.Error(), "401") {
		t.Errorf("probed /debug/probes without a token: %v, want 401", err)
	}
	if _, err := n.ProbedGet(ctx, "/debug/probes"); err != nil {
		t.Errorf("probed /debug/probes: %v", err)
	}

	// probed at work: an annotation readiness probe (exec through the node's
	// containerd, HTTP to the pod IP) gates the pod's Ready through its
	// readiness gate, written under probed's own RBAC and admission policy.
	start = time.Now()
	gated := runPod(ctx, t, n, &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "gated", Namespace: "default", Annotations: map[string]string{
			"probed.io/probes": `{"app": {"readinessProbe": {"exec": {"command": ["cat", "/www/index.html"]}, "periodSeconds": 1},
			                              "livenessProbe": {"httpGet": {"path": "/", "port": 8080}, "periodSeconds": 1}}}`,
		}},
		Spec: corev1.PodSpec{
			TerminationGracePeriodSeconds: ptr(int64(1)),
			ReadinessGates:                []corev1.PodReadinessGate{{ConditionType: "probed.io/ready"}},
			Containers: []corev1.Container{{
				Name: "app", Image: containerd.BusyboxImage, ImagePullPolicy: corev1.PullNever,
				Command: []string{"sh", "-c", "mkdir -p /www && echo ok >/www/index.html && exec httpd -f -p 8080 -h /www"},
			}},
		},
	}, true)
	t.Logf("pod gated by probed's readiness probe Ready in %v", time.Since(start))
	if metrics, err := n.ProbedGet(ctx, "/metrics"); err != nil {
		t.Errorf("metrics: %v", err)
	} else if !strings.Contains(string(metrics), `prober_probe_total{container="app",namespace="default",pod="gated",pod_uid="`+string(gated.UID)+`",probe_type="Readiness",result="successful"}`) {
		t.Errorf("no successful readiness probe of the gated pod in /metrics")
	}

	// Stop, and look for leftovers.
	runDir, bridge, cgroupParent := n.RunDir, n.Bridge, n.state.CgroupParent
	pids := pidsOf(t, runDir)
	start = time.Now()
	if err := n.Stop(); err != nil {
		t.Fatalf("stop: %v", err)
	}
	t.Logf("node stopped in %v", time.Since(start))
	if err := n.Stop(); err != nil {
		t.Fatalf("second stop: %v", err)
	}
	for name, pid := range pids {
		if _, err := os.Stat("/proc/" + strconv.Itoa(pid)); err == nil && pidRuns(pid, runDir+"/") {
			t.Errorf("%s (pid %d) still runs", name, pid)
		}
	}
	if procs := processesMentioning(runDir + "/"); len(procs) > 0 {
		t.Errorf("processes still mention the run dir: %v", procs)
	}
	if m := mountsUnder(runDir); len(m) > 0 {
		t.Errorf("mounts left: %v", m)
	}
	if linkExists(bridge) {
		t.Errorf("bridge %s left", bridge)
	}
	if _, err := os.Stat(runDir); !os.IsNotExist(err) {
		t.Errorf("run dir %s left: %v", runDir, err)
	}
	if left, _ := filepath.Glob("/sys/fs/cgroup/*" + cgroupParent); len(left) > 0 {
		t.Errorf("cgroups left: %v", left)
	}
	if len(liveRegistrationsLocked()) == 0 {
		if after := readSysctls(); fmt.Sprint(after) != fmt.Sprint(sysctlsBefore) {
			t.Errorf("sysctls not restored: before %v, after %v", sysctlsBefore, after)
		}
	} else {
		t.Log("another node runs on this machine: the sysctls stay set until it stops")
	}
}

// runPod creates pod and waits until it runs (and, if ready, is Ready).
func runPod(ctx context.Context, t *testing.T, n *Node, pod *corev1.Pod, ready bool) *corev1.Pod {
	t.Helper()
	pods := n.Client().CoreV1().Pods(pod.Namespace)
	if _, err := pods.Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	var got *corev1.Pod
	err := poll(ctx, 200*time.Millisecond, func() (bool, error) {
		p, err := pods.Get(ctx, pod.Name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		got = p
		return p.Status.Phase == corev1.PodRunning && p.Status.PodIP != "" && (!ready || podReady(p)), nil
	})
	if err != nil {
		t.Fatalf("pod %s: %v; status %+v\n%s", pod.Name, err, got.Status, n.diagnose(context.Background(), pod.Namespace, labelsEverything()))
	}
	return got
}

func httpGet(ctx context.Context, url string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		return string(b), fmt.Errorf("%s: %s", url, resp.Status)
	}
	return string(b), err
}

// pidsOf reads every PID file of the node.
func pidsOf(t *testing.T, runDir string) map[string]int {
	files, _ := filepath.Glob(filepath.Join(runDir, "*.pid"))
	more, _ := filepath.Glob(filepath.Join(runDir, "*", "*.pid"))
	pids := map[string]int{}
	for _, f := range append(files, more...) {
		b, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
		if err == nil {
			pids[strings.TrimSuffix(filepath.Base(f), ".pid")] = pid
		}
	}
	if len(pids) < 6 {
		t.Errorf("expected PID files for etcd, kube-apiserver, containerd, kube-controller-manager, kube-scheduler, kubelet; got %v", pids)
	}
	return pids
}

// processesMentioning lists processes whose command line contains s
// (shims name the containerd socket, the others their run dir).
func processesMentioning(s string) []string {
	entries, _ := os.ReadDir("/proc")
	var out []string
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == os.Getpid() {
			continue
		}
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err == nil && strings.Contains(string(b), s) {
			out = append(out, fmt.Sprintf("%d %s", pid, strings.ReplaceAll(string(b), "\x00", " ")))
		}
	}
	return out
}

func readSysctls() map[string]string {
	m := map[string]string{}
	for _, k := range touchedSysctls {
		if b, err := os.ReadFile(filepath.Join("/proc/sys", k)); err == nil {
			m[k] = strings.TrimSpace(string(b))
		}
	}
	return m
}

func liveRegistrationsLocked() []registration {
	var r []registration
	_ = withHostLock(func() error { r = liveRegistrations(); return nil })
	return r
}

func ptr[T any](v T) *T { return &v }

// TestSweepStale: a test process that dies without Stop takes its control
// plane and kubelet with it (parent-death signal), but leaves containerd, its
// pods, the bridge and the sysctls; the next Start sweeps them up.
func TestSweepStale(t *testing.T) {
	if os.Getenv("PROBED_NODE_CRASH") == "1" {
		ctx := context.Background()
		n, err := Start(ctx, Options{})
		if err != nil {
			fmt.Println("ERR", err)
			os.Exit(1)
		}
		runPod(ctx, t, n, &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: "orphan", Namespace: "default"},
			Spec: corev1.PodSpec{Containers: []corev1.Container{{
				Name: "c", Image: containerd.BusyboxImage, ImagePullPolicy: corev1.PullNever, Command: []string{"sleep", "3600"},
			}}},
		}, false)
		fmt.Println("RUNDIR", n.RunDir, n.Bridge)
		os.Exit(0) // no Stop: a crash
	}
	if _, err := os.Stat(filepath.Join(controlplaneBinDir(t), "kubelet")); err != nil {
		t.Skipf("skipping: %v", err)
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestSweepStale$")
	cmd.Env = append(os.Environ(), "PROBED_NODE_CRASH=1")
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("crashing child: %v\n%s", err, out)
	}
	var runDir, bridge string
	for _, l := range strings.Split(string(out), "\n") {
		if rest, ok := strings.CutPrefix(l, "RUNDIR "); ok {
			_, _ = fmt.Sscan(rest, &runDir, &bridge)
		}
	}
	if runDir == "" {
		t.Fatalf("child output: %s", out)
	}
	if procs := processesMentioning(runDir + "/"); len(procs) == 0 {
		t.Fatalf("the crashed node should have left containerd and its shims running")
	}
	t.Logf("left behind by the crash: %d processes, bridge %s up: %v", len(processesMentioning(runDir+"/")), bridge, linkExists(bridge))
	sweepStale()
	if procs := processesMentioning(runDir + "/"); len(procs) > 0 {
		t.Errorf("processes left: %v", procs)
	}
	if linkExists(bridge) {
		t.Errorf("bridge %s left", bridge)
	}
	if m := mountsUnder(runDir); len(m) > 0 {
		t.Errorf("mounts left: %v", m)
	}
	if _, err := os.Stat(runDir); !os.IsNotExist(err) {
		t.Errorf("run dir %s left: %v", runDir, err)
	}
	if left, _ := filepath.Glob(fmt.Sprintf("/dev/shm/probed-etcd-%d-*", cmd.Process.Pid)); len(left) > 0 {
		t.Errorf("etcd's data left: %v", left)
	}
}

func controlplaneBinDir(t *testing.T) string {
	d, err := controlplane.BinDir()
	if err != nil {
		t.Skip(err)
	}
	return d
}
