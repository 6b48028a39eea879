//go:build integration

// Package integration runs the real probed binary against a real etcd and
// kube-apiserver. The tests play the kubelet: they create Nodes and Pods and
// write pod status; probes go to real servers on 127.0.0.x.
package integration

import (
	"bufio"
	"context"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"

	"github.com/probed-dev/probed/test/harness/controlplane"
	"github.com/probed-dev/probed/test/harness/proc"
)

var (
	cp        *controlplane.ControlPlane
	client    kubernetes.Interface
	probedBin string
	seq       atomic.Int64
	// scraperToken may get /metrics and /debug/probes: its service
	// account is bound to deploy/scraper-roles.yaml's two roles.
	scraperToken string
	// servingCert is a CA and a certificate it signed for 127.0.0.1, for
	// probed's --tls-cert-file in the tests that verify its certificate.
	servingCert testCert
)

func TestMain(m *testing.M) {
	os.Exit(run(m))
}

func run(m *testing.M) int {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	dir, err := os.MkdirTemp("", "probed-it-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(dir)
	probedBin = filepath.Join(dir, "probed")
	// The daemon under test is built with the race detector, so data races in
	// the real process fail the run too (it exits 66 on a race).
	// PROBED_NO_RACE=1 (make bench) measures the daemon as it ships.
	if err := proc.Build(ctx, probedBin, "./cmd/probed", daemonBuild()); err != nil {
		fmt.Fprintln(os.Stderr, "building probed:", err)
		return 1
	}
	cp, err = controlplane.Start(ctx, controlplane.Options{})
	if err != nil {
		fmt.Fprintln(os.Stderr, "starting the control plane:", err)
		return 1
	}
	defer cp.Stop()
	// The tests poll the API server from many goroutines; client-go's default
	// 5 QPS would make the tests, not probed, the slow part.
	cfg := cp.RESTConfig()
	cfg.QPS, cfg.Burst = 500, 1000
	if client, err = kubernetes.NewForConfig(cfg); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	if err := applyAccessManifests(ctx, client); err != nil {
		fmt.Fprintln(os.Stderr, "applying deploy/ access manifests:", err)
		return 1
	}
	if scraperToken, err = readerToken(ctx, "probed-it-scraper", "probed-metrics-reader", "probed-debug-reader"); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	if servingCert, err = newTestCert(dir); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	code := m.Run()
	if code != 0 {
		fmt.Fprint(os.Stderr, cp.LogTails(40))
	}
	return code
}

// testEnv is one test's node, namespace and probed.
type testEnv struct {
	t    *testing.T
	ctx  context.Context
	node string
	ns   string
	// kubeconfig authenticates as probed's service account with a token
	// bound to a pod on node, as the DaemonSet's projected token would.
	kubeconfig string
}

func newEnv(t *testing.T) *testEnv {
	t.Helper()
	n := seq.Add(1)
	e := &testEnv{t: t, ctx: context.Background(), node: fmt.Sprintf("node-%d", n), ns: fmt.Sprintf("it-%d", n)}
	if _, err := cp.CreateNode(e.ctx, e.node); err != nil {
		t.Fatal(err)
	}
	if err := cp.EnsureNamespace(e.ctx, e.ns); err != nil {
		t.Fatal(err)
	}
	e.kubeconfig = e.probedKubeconfig()
	return e
}

// probedKubeconfig issues probed's bound token for the env's node.
func (e *testEnv) probedKubeconfig() string {
	e.t.Helper()
	token, err := cp.TokenFor(e.ctx, "probed-system", "probed", "probed-"+e.node, "", e.node)
	if err != nil {
		e.t.Fatal(err)
	}
	path := filepath.Join(e.t.TempDir(), "probed.kubeconfig")
	if err := controlplane.WriteKubeconfig(path, cp.ConfigForToken(token)); err != nil {
		e.t.Fatal(err)
	}
	return path
}

// probedProc is a running probed process.
type probedProc struct {
	*proc.Daemon
	t    *testing.T
	addr string
	// scheme is https, or http with --metrics-insecure-serving; over
	// https, get sends scraperToken.
	scheme string
	http   *http.Client
}

// daemonBuild is how the tier builds the daemons it runs: with the race
// detector unless PROBED_NO_RACE=1.
func daemonBuild() proc.BuildOptions {
	if os.Getenv("PROBED_NO_RACE") == "1" {
		return proc.BuildOptions{Shipped: true}
	}
	return proc.BuildOptions{Race: true}
}

func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// startProbed runs probed for the env's node and waits for /healthz.
func (e *testEnv) startProbed(extra ...string) *probedProc {
	e.t.Helper()
	p := e.startProbedNoWait(extra...)
	eventually(e.t, "probed /healthz", 30*time.Second, func() bool {
		code, _ := p.get("/healthz")
		return code == http.StatusOK
	})
	return p
}

// startProbedNoWait runs probed for the env's node.
func (e *testEnv) startProbedNoWait(extra ...string) *probedProc {
	e.t.Helper()
	return e.startProbedEnv(nil, extra...)
}

// startProbedEnv runs probed for the env's node with env added to its
// environment.
func (e *testEnv) startProbedEnv(env []string, extra ...string) *probedProc {
	e.t.Helper()
	p := &probedProc{t: e.t, addr: freeAddr(e.t), scheme: "https"}
	if slices.Contains(extra, "--metrics-insecure-serving") {
		p.scheme = "http"
	}
	// probed's certificate is self-signed unless the test gives one; the
	// tests that check it use their own client. One kept-alive connection
	// instead of a handshake per poll.
	tr := &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}
	p.http = &http.Client{Timeout: 5 * time.Second, Transport: tr}
	e.t.Cleanup(tr.CloseIdleConnections)
	args := append([]string{
		"--kubeconfig=" + e.kubeconfigOrAdmin(),
		"--node-name=" + e.node,
		"--metrics-bind-address=" + p.addr,
		"--runtime-type=none",
		// The test pods run on 127.0.0.x with no sandbox, so no runtime
		// can say which IPs they have: take their status as written.
		"--trust-pod-status-ips",
		"--status-resync=5s",
		"-v=3",
	}, extra...)
	o := proc.DaemonOptions{TailLines: 200}
	if env != nil {
		o.Env = append(os.Environ(), env...)
	}
	p.Daemon = proc.StartDaemon(e.t, "probed", probedBin, args, o)
	return p
}

// get reads one of probed's endpoints, over https with scraperToken unless
// probed runs with --metrics-insecure-serving.
func (p *probedProc) get(path string) (int, string) {
	token := ""
	if p.scheme == "https" {
		token = scraperToken
	}
	return p.getAs(path, token)
}

// getAs reads path with token ("": none).
func (p *probedProc) getAs(path, token string) (int, string) {
	req, err := http.NewRequest(http.MethodGet, p.scheme+"://"+p.addr+path, nil)
	if err != nil {
		return 0, err.Error()
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := p.http.Do(req)
	if err != nil {
		return 0, err.Error()
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// metric returns the value of the first sample whose line starts with prefix.
func (p *probedProc) metricLines(prefix string) []string {
	_, body := p.get("/metrics")
	var out []string
	sc := bufio.NewScanner(strings.NewReader(body))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		if strings.HasPrefix(sc.Text(), prefix) {
			out = append(out, sc.Text())
		}
	}
	return out
}

type debugEntry struct {
	PodNamespace string `json:"podNamespace"`
	PodName      string `json:"podName"`
	Container    string `json:"container"`
	ProbeType    string `json:"probeType"`
	Spec         string `json:"spec"`
	State        string `json:"state"`
	History      []struct {
		Result string `json:"result"`
		Output string `json:"output"`
		Error  string `json:"error"`
	} `json:"history"`
}

func (p *probedProc) debugProbes() []debugEntry {
	p.t.Helper()
	_, body := p.get("/debug/probes")
	var out []debugEntry
	if err := json.Unmarshal([]byte(body), &out); err != nil {
		p.t.Fatalf("/debug/probes: %v: %s", err, body)
	}
	return out
}

func eventually(t *testing.T, what string, timeout time.Duration, cond func() bool) {
	t.Helper()
	err := wait.PollUntilContextTimeout(context.Background(), 20*time.Millisecond, timeout, true,
		func(context.Context) (bool, error) { return cond(), nil })
	if err != nil {
		t.Fatalf("timed out after %v waiting for %s", timeout, what)
	}
}

// consistently fails if cond turns false within d.
func consistently(t *testing.T, what string, d time.Duration, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for time.Now().Before(deadline) {
		if !cond() {
			t.Fatalf("%s stopped holding", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// container describes one container of a test pod.
type container struct {
	name  string
	ports []v1.ContainerPort
	init  bool // a restartable init container (sidecar)
}

// createPod creates a pod bound to the env's node with the probes annotation,
// then, as the kubelet would, marks it Running with podIP and running containers.
func (e *testEnv) createPod(name, annotation string, gates bool, containers ...container) *v1.Pod {
	e.t.Helper()
	return e.createPodWithVolumes(name, annotation, gates, nil, containers...)
}

// createPodWithVolumes is createPod for a pod that declares volumes.
func (e *testEnv) createPodWithVolumes(name, annotation string, gates bool, volumes []v1.Volume, containers ...container) *v1.Pod {
	e.t.Helper()
	pod := &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: e.ns, Annotations: map[string]string{}},
		Spec:       v1.PodSpec{NodeName: e.node, RestartPolicy: v1.RestartPolicyAlways, Volumes: volumes},
	}
	if annotation != "" {
		pod.Annotations["probed.io/probes"] = annotation
	}
	if gates {
		pod.Spec.ReadinessGates = []v1.PodReadinessGate{{ConditionType: "probed.io/ready"}}
	}
	always := v1.ContainerRestartPolicyAlways
	for _, c := range containers {
		spec := v1.Container{Name: c.name, Image: "busybox", Ports: c.ports}
		if c.init {
			spec.RestartPolicy = &always
			pod.Spec.InitContainers = append(pod.Spec.InitContainers, spec)
		} else {
			pod.Spec.Containers = append(pod.Spec.Containers, spec)
		}
	}
	created, err := client.CoreV1().Pods(e.ns).Create(e.ctx, pod, metav1.CreateOptions{})
	if err != nil {
		e.t.Fatal(err)
	}
	return created
}

// runPod sets the pod Running on ip with every container running since startedAgo.
func (e *testEnv) runPod(pod *v1.Pod, ip string, startedAgo time.Duration) *v1.Pod {
	e.t.Helper()
	var out *v1.Pod
	e.updateStatus(pod.Name, func(p *v1.Pod) {
		p.Status.Phase = v1.PodRunning
		p.Status.PodIP = ip
		p.Status.PodIPs = []v1.PodIP{{IP: ip}}
		p.Status.HostIP = "127.0.0.1"
		started := metav1.NewTime(time.Now().Add(-startedAgo).Truncate(time.Second))
		p.Status.StartTime = &started
		mk := func(c v1.Container) v1.ContainerStatus {
			t := true
			return v1.ContainerStatus{
				Name: c.Name, Image: c.Image, ImageID: "sha256:0", Started: &t, Ready: true,
				ContainerID: fmt.Sprintf("containerd://%s-%s-%d", p.UID, c.Name, 0),
				State:       v1.ContainerState{Running: &v1.ContainerStateRunning{StartedAt: started}},
			}
		}
		p.Status.ContainerStatuses = nil
		for _, c := range p.Spec.Containers {
			p.Status.ContainerStatuses = append(p.Status.ContainerStatuses, mk(c))
		}
		p.Status.InitContainerStatuses = nil
		for _, c := range p.Spec.InitContainers {
			p.Status.InitContainerStatuses = append(p.Status.InitContainerStatuses, mk(c))
		}
	})
	out, err := client.CoreV1().Pods(e.ns).Get(e.ctx, pod.Name, metav1.GetOptions{})
	if err != nil {
		e.t.Fatal(err)
	}
	return out
}

// restartContainer plays a container restart: a new container ID, started now.
func (e *testEnv) restartContainer(podName, containerName string) {
	e.t.Helper()
	e.updateStatus(podName, func(p *v1.Pod) {
		for i := range p.Status.ContainerStatuses {
			cs := &p.Status.ContainerStatuses[i]
			if cs.Name == containerName {
				cs.RestartCount++
				cs.ContainerID = fmt.Sprintf("containerd://%s-%s-%d", p.UID, cs.Name, cs.RestartCount)
				cs.State = v1.ContainerState{Running: &v1.ContainerStateRunning{StartedAt: metav1.Now()}}
			}
		}
	})
}

// updateStatus read-modify-writes pod status, retrying conflicts, as the kubelet's status manager would.
func (e *testEnv) updateStatus(name string, mutate func(*v1.Pod)) {
	e.t.Helper()
	err := wait.PollUntilContextTimeout(e.ctx, 20*time.Millisecond, 10*time.Second, true, func(ctx context.Context) (bool, error) {
		p, err := client.CoreV1().Pods(e.ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		mutate(p)
		_, err = client.CoreV1().Pods(e.ns).UpdateStatus(ctx, p, metav1.UpdateOptions{})
		return err == nil, nil
	})
	if err != nil {
		e.t.Fatalf("updating status of %s: %v", name, err)
	}
}

func (e *testEnv) pod(name string) *v1.Pod {
	e.t.Helper()
	p, err := client.CoreV1().Pods(e.ns).Get(e.ctx, name, metav1.GetOptions{})
	if err != nil {
		e.t.Fatal(err)
	}
	return p
}

func condition(p *v1.Pod, t string) *v1.PodCondition {
	for i := range p.Status.Conditions {
		if string(p.Status.Conditions[i].Type) == t {
			return &p.Status.Conditions[i]
		}
	}
	return nil
}

// condIs reports whether the pod's condition t currently has status s.
func (e *testEnv) condIs(name, t string, s v1.ConditionStatus) bool {
	p, err := client.CoreV1().Pods(e.ns).Get(e.ctx, name, metav1.GetOptions{})
	if err != nil {
		return false
	}
	c := condition(p, t)
	return c != nil && c.Status == s
}

func (e *testEnv) waitCond(name, t string, s v1.ConditionStatus, timeout time.Duration) {
	e.t.Helper()
	eventually(e.t, fmt.Sprintf("pod %s condition %s=%s", name, t, s), timeout, func() bool { return e.condIs(name, t, s) })
}

// events lists the events about a pod.
func (e *testEnv) events(podUID types.UID) []v1.Event {
	e.t.Helper()
	list, err := client.CoreV1().Events(e.ns).List(e.ctx, metav1.ListOptions{FieldSelector: "involvedObject.uid=" + string(podUID)})
	if err != nil {
		e.t.Fatal(err)
	}
	return list.Items
}

func (e *testEnv) findEvent(podUID types.UID, reason, contains string) *v1.Event {
	for _, ev := range e.events(podUID) {
		if ev.Reason == reason && strings.Contains(ev.Message, contains) {
			ev := ev
			return &ev
		}
	}
	return nil
}

func mustJSON(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return string(b)
}

func typesUID(s string) types.UID { return types.UID(s) }

func itoa(n int64) string { return fmt.Sprint(n) }

func (e *testEnv) kubeconfigOrAdmin() string {
	if e.kubeconfig != "" {
		return e.kubeconfig
	}
	return cp.KubeconfigPath
}
