//go:build integration

package integration

import (
	"net"
	"net/http"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Probes send the User-Agent of the kubelet on their node: kube-probe/
// <major>.<minor> from the Node's status.nodeInfo.kubeletVersion, as the
// kubelet sends its own compiled-in version, with its "+" for a
// pre-release or vendor version, and through an in-place upgrade.
func TestUserAgentFollowsTheNodesKubelet(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	node, err := client.CoreV1().Nodes().Get(e.ctx, e.node, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	node.Status.NodeInfo.KubeletVersion = "v1.36.1"
	if _, err := client.CoreV1().Nodes().UpdateStatus(e.ctx, node, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}

	ip := loopbackIP()
	ln, err := net.Listen("tcp", net.JoinHostPort(ip, "0"))
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var agents []string
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		agents = append(agents, r.UserAgent())
		mu.Unlock()
	})}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })

	pod := e.createPod("ua", mustJSON(probes{"app": {"readinessProbe": httpProbe(ln.Addr().(*net.TCPAddr).Port, "/", nil)}}), true, container{name: "app"})
	e.runPod(pod, ip, time.Minute)
	e.startProbed()
	eventually(t, "a probe", 20*time.Second, func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(agents) > 0
	})
	mu.Lock()
	first := agents[0]
	mu.Unlock()
	if first != "kube-probe/1.36" {
		t.Errorf("User-Agent %q, want kube-probe/1.36 (the node's kubelet v1.36.1)", first)
	}

	// The kubelet is upgraded in place to a vendor build.
	node, err = client.CoreV1().Nodes().Get(e.ctx, e.node, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	node.Status.NodeInfo.KubeletVersion = "v1.37.2-eks-4f2a9c1"
	if _, err := client.CoreV1().Nodes().UpdateStatus(e.ctx, node, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "a probe with the upgraded kubelet's User-Agent", 20*time.Second, func() bool {
		mu.Lock()
		defer mu.Unlock()
		return agents[len(agents)-1] == "kube-probe/1.37+"
	})
}
