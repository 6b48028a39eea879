//go:build scale

package scale

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/retry"

	"github.com/probed-dev/probed/test/harness/controlplane"
	"github.com/probed-dev/probed/test/harness/proc"
)

// Probe timings of every pod: the API defaults (period 10 s), readiness
// deciding on one failure so transitions are quick to observe.
const (
	readyPeriod    = 10
	livePeriod     = 10
	liveThreshold  = 3
	probeTimeout   = 2
	podCreateConns = 16
)

// simNode is one simulated node: its Node object, pod network, runtime,
// kubelet identity and probed.
type simNode struct {
	Index      int
	Name, NS   string
	Site       *site
	Runtime    *simRuntime
	Kubeconfig string // probed's, with its node-bound token
	Probed     *probedProc
	Pods       []string // pod names, in the node's namespace
	// Env is probed's environment; nil inherits the test's.
	Env []string
	dir string
}

func (n *simNode) key(pod string) string { return n.NS + "/" + pod }

// newNode creates node i's objects and identities and starts its runtime;
// probed is started separately (startProbed).
func newNode(ctx context.Context, t *testing.T, k *kubelet, i int, dir string) (*simNode, error) {
	n := &simNode{Index: i, Name: fmt.Sprintf("scale-n%03d", i), NS: fmt.Sprintf("scale-n%03d", i), dir: filepath.Join(dir, fmt.Sprintf("n%03d", i))}
	if err := os.MkdirAll(n.dir, 0o755); err != nil {
		return nil, err
	}
	if _, err := cp.CreateNode(ctx, n.Name); err != nil {
		return nil, err
	}
	if err := cp.EnsureNamespace(ctx, n.NS); err != nil {
		return nil, err
	}
	// probed's projected token: bound to a pod on the node, so it carries
	// the node name the confinement policy checks.
	token, err := cp.TokenFor(ctx, "probed-system", "probed", "probed-"+n.Name, "", n.Name)
	if err != nil {
		return nil, err
	}
	n.Kubeconfig = filepath.Join(n.dir, "probed.kubeconfig")
	if err := controlplane.WriteKubeconfig(n.Kubeconfig, cp.ConfigForToken(token)); err != nil {
		return nil, err
	}
	kc, err := kubeletClient(n.Name)
	if err != nil {
		return nil, err
	}
	k.nodes[n.Name] = kc
	n.Site = startSite(t, siteIP(i))
	n.Runtime = startRuntime(t, n.dir, func(id string) { k.containerStopped(ctx, id) }, k.containerLabels)
	return n, nil
}

// kubeletClient authenticates as system:node:<node> in system:nodes, so the
// Node authorizer and NodeRestriction apply to its writes as to a kubelet's.
func kubeletClient(node string) (kubernetes.Interface, error) {
	certPEM, keyPEM, err := cp.IssueClientCert("system:node:"+node, "system:nodes")
	if err != nil {
		return nil, err
	}
	ca, err := os.ReadFile(cp.CAFile)
	if err != nil {
		return nil, err
	}
	return kubernetes.NewForConfig(&rest.Config{
		Host:            cp.Host,
		TLSClientConfig: rest.TLSClientConfig{CertData: certPEM, KeyData: keyPEM, CAData: ca},
		QPS:             50, Burst: 100,
	})
}

func (n *simNode) annotation(pod string) string {
	probe := func(path string, period, failures int) map[string]any {
		return map[string]any{
			"httpGet":       map[string]any{"path": path, "port": n.Site.Port},
			"periodSeconds": period, "failureThreshold": failures, "timeoutSeconds": probeTimeout,
		}
	}
	b, _ := json.Marshal(map[string]any{"app": map[string]any{
		"readinessProbe": probe("/ready/"+pod, readyPeriod, 1),
		"livenessProbe":  probe("/live/"+pod, livePeriod, liveThreshold),
	}})
	return string(b)
}

// createPods creates m pods bound to the node and, as its kubelet would,
// marks them Running (the harness's set-up writes, as system:masters).
func (n *simNode) createPods(ctx context.Context, k *kubelet, m int) error {
	names := make(chan string)
	var (
		wg       sync.WaitGroup
		mu       sync.Mutex
		firstErr error
	)
	for range podCreateConns {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for name := range names {
				if err := n.createPod(ctx, k, name); err != nil {
					mu.Lock()
					if firstErr == nil {
						firstErr = fmt.Errorf("pod %s/%s: %w", n.NS, name, err)
					}
					mu.Unlock()
				}
			}
		}()
	}
	for j := range m {
		name := fmt.Sprintf("p%03d", j)
		n.Pods = append(n.Pods, name)
		names <- name
	}
	close(names)
	wg.Wait()
	return firstErr
}

func (n *simNode) createPod(ctx context.Context, k *kubelet, name string) error {
	return n.createPodIn(ctx, k, n.NS, name, nil, n.annotation(name))
}

// createPodIn creates pod ns/name bound to the node, with labels besides
// podLabel and the probes annotation, and marks it Running as its kubelet
// would.
func (n *simNode) createPodIn(ctx context.Context, k *kubelet, ns, name string, labels map[string]string, probes string) error {
	l := map[string]string{podLabel: "true"}
	for key, v := range labels {
		l[key] = v
	}
	pod := &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Name: name, Namespace: ns,
			Labels:      l,
			Annotations: map[string]string{"probed.io/probes": probes},
		},
		Spec: v1.PodSpec{
			NodeName:                      n.Name,
			TerminationGracePeriodSeconds: ptr(int64(1)),
			Containers:                    []v1.Container{{Name: "app", Image: "busybox", Ports: []v1.ContainerPort{{Name: "http", ContainerPort: int32(n.Site.Port)}}}},
			ReadinessGates:                []v1.PodReadinessGate{{ConditionType: gate}},
		},
	}
	created, err := client.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{})
	if apierrors.IsAlreadyExists(err) {
		created, err = client.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
	}
	if err != nil {
		return err
	}
	k.registerContainer(ns+"/"+name, created.UID, 0)
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		runningStatus(created, n.Site.IP, time.Now())
		_, err := client.CoreV1().Pods(ns).UpdateStatus(ctx, created, metav1.UpdateOptions{})
		if apierrors.IsConflict(err) {
			if fresh, gerr := client.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{}); gerr == nil {
				created = fresh
			}
		}
		return err
	})
}

// probedProc is one node's probed.
type probedProc struct {
	*proc.Process
	Addr string
}

// startProbed starts the node's probed and returns without waiting.
func (n *simNode) startProbed(extra []string) error {
	// A loopback address of the node's own: a port that "127.0.0.1:0" hands
	// out is free again once closed, so two nodes were once given the same
	// one; the second probed exited ("address already in use"), the first
	// answered its /readyz, and its 20 pods never turned Ready.
	ln, err := net.Listen("tcp", fmt.Sprintf("127.1.%d.%d:0", n.Index/250, n.Index%250+1))
	if err != nil {
		return err
	}
	addr := ln.Addr().String()
	_ = ln.Close()
	args := append([]string{
		"--kubeconfig=" + n.Kubeconfig,
		"--node-name=" + n.Name,
		"--metrics-bind-address=" + addr,
		// Plain HTTP on loopback: the harness polls /readyz of dozens of
		// daemons, and /metrics auth is not what is measured here.
		"--metrics-insecure-serving",
		"--runtime-type=cri",
		"--runtime-endpoint=" + n.Runtime.Endpoint,
		// The targets are on 127.x, which the default policy refuses.
		"--probe-host-policy=kubelet",
		"-v=1",
	}, extra...)
	p, err := proc.Start("probed-"+n.Name, filepath.Join(n.dir, "probed.log"), filepath.Join(n.dir, "probed.pid"), probedBin, args, proc.Options{Env: n.Env})
	if err != nil {
		return err
	}
	n.Probed = &probedProc{Process: p, Addr: addr}
	return nil
}

var probedHTTP = &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{}}}

// ready reports whether probed's /readyz answers 200.
func (p *probedProc) ready() bool {
	resp, err := probedHTTP.Get("http://" + p.Addr + "/readyz")
	if err != nil {
		return false
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, resp.Body)
	return resp.StatusCode == http.StatusOK
}

// waitReady polls /readyz until it answers or the deadline passes, failing
// early with the log tail if probed exits.
func (p *probedProc) waitReady(ctx context.Context, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		if done, _ := p.Exited(); done {
			return p.Failure("probed exited before /readyz")
		}
		if p.ready() {
			return nil
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return p.Failure("probed /readyz not ok after %v", timeout)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
