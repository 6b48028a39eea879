package nodeinfo

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/probed-dev/probed/pkg/kubeclient/fromclientset"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/probed-dev/probed/internal/informertest"
	"github.com/probed-dev/probed/pkg/prober"
	"github.com/probed-dev/probed/pkg/probespec"
	"github.com/probed-dev/probed/pkg/results"
)

// The kubelet's User-Agent version is gitMajor.gitMinor, and its build
// (hack/lib/version.sh) appends "+" to gitMinor when the version has a
// pre-release part: vendor and release-candidate kubelets send
// kube-probe/1.35+.
func TestKubeletMinor(t *testing.T) {
	for in, want := range map[string]string{
		"v1.37.2":                       "1.37",
		"1.33.0":                        "1.33",
		"v1.35.4-eks-1a2b3c":            "1.35+",
		"v1.35.4-gke.1234000":           "1.35+",
		"v1.37.0-rc.1":                  "1.37+",
		"v1.36.0-alpha.2.15+84c76d1142": "1.36+",
		"v1.34.1-dirty":                 "1.34+",
		// Build metadata without a pre-release part: version.sh's regexp
		// leaves the minor as it is.
		"v1.36.0+k3s1": "1.36",
	} {
		got, err := KubeletMinor(in)
		if err != nil || got != want {
			t.Errorf("KubeletMinor(%q) = %q, %v; want %q", in, got, err, want)
			continue
		}
		if ua := prober.NewUserAgent(got); ua.Probe() != "kube-probe/"+want || ua.Lifecycle() != "kube-lifecycle/"+want {
			t.Errorf("%q: User-Agents %q and %q", in, ua.Probe(), ua.Lifecycle())
		}
	}
	for _, bad := range []string{"", "vX", "latest"} {
		if got, err := KubeletMinor(bad); err == nil {
			t.Errorf("KubeletMinor(%q) = %q, want an error", bad, got)
		}
	}
}

// The User-Agent version is the node's kubelet's; a Node that cannot be
// read leaves the fallback.
func TestNodeUserAgentVersion(t *testing.T) {
	client := fake.NewClientset(&v1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: "n1"},
		Status:     v1.NodeStatus{NodeInfo: v1.NodeSystemInfo{KubeletVersion: "v1.36.3"}},
	})
	if got := UserAgentVersion(context.Background(), fromclientset.New(client), "n1", "1.34"); got != "1.36" {
		t.Errorf("version %q, want 1.36", got)
	}
	denied := fake.NewClientset()
	denied.PrependReactor("get", "nodes", func(k8stesting.Action) (bool, runtime.Object, error) {
		return true, nil, apierrors.NewForbidden(schema.GroupResource{Resource: "nodes"}, "n1", fmt.Errorf("rbac"))
	})
	// Refused: the fallback at once, with no asking again.
	if got := UserAgentVersion(context.Background(), fromclientset.New(denied), "n1", "1.34"); got != "1.34" {
		t.Errorf("forbidden: version %q, want the fallback", got)
	}
	// A Node without a version: the fallback at once.
	bare := fake.NewClientset(&v1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1"}})
	if got := UserAgentVersion(context.Background(), fromclientset.New(bare), "n1", "1.34"); got != "1.34" {
		t.Errorf("no version: %q, want the fallback", got)
	}
}

// An in-place upgrade of the node's kubelet changes its Node's
// kubeletVersion: the probes that follow send the new version.
func TestUserAgentFollowsTheNode(t *testing.T) {
	node := &v1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: "n1"},
		Status:     v1.NodeStatus{NodeInfo: v1.NodeSystemInfo{KubeletVersion: "v1.35.4"}},
	}
	client := fake.NewClientset(node, &v1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: "other"},
		Status:     v1.NodeStatus{NodeInfo: v1.NodeSystemInfo{KubeletVersion: "v1.30.0"}},
	})
	watching := informertest.WatchStarted(client, "nodes")
	agents := make(chan string, 16)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		agents <- r.Header.Get("User-Agent")
	}))
	defer srv.Close()
	port, _ := strconv.Atoi(srv.URL[strings.LastIndex(srv.URL, ":")+1:])
	ua := prober.NewUserAgent(UserAgentVersion(context.Background(), fromclientset.New(client), "n1", "1.34"))
	p := prober.New(nil, prober.Options{UserAgent: ua})
	probe := func() string {
		t.Helper()
		spec := &v1.Probe{ProbeHandler: v1.ProbeHandler{HTTPGet: &v1.HTTPGetAction{Port: intstr.FromInt32(int32(port))}}, TimeoutSeconds: 5}
		if r, out, err := p.Probe(context.Background(), probespec.Readiness, spec, prober.Target{PodIP: "127.0.0.1"}, nil); err != nil || r != results.Success {
			t.Fatalf("probe: %v %q %v", r, out, err)
		}
		return <-agents
	}
	if got := probe(); got != "kube-probe/1.35" {
		t.Fatalf("User-Agent %q at start, want kube-probe/1.35", got)
	}

	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); FollowKubeletVersion(ctx, fromclientset.New(client), "n1", ua) }()
	defer func() { cancel(); <-done }()
	informertest.Wait(t, watching)

	node.Status.NodeInfo.KubeletVersion = "v1.36.1-eks-4f2a9c"
	if _, err := client.CoreV1().Nodes().UpdateStatus(context.Background(), node, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := wait.PollUntilContextTimeout(context.Background(), 5*time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) {
		return ua.Version() == "1.36+", nil
	}); err != nil {
		t.Fatalf("the User-Agent version stayed %q after the Node said v1.36.1-eks-4f2a9c", ua.Version())
	}
	if got := probe(); got != "kube-probe/1.36+" {
		t.Errorf("User-Agent %q after the upgrade, want kube-probe/1.36+", got)
	}
}

// Without list and watch on nodes, following stops at once, and the version
// read at start stays.
func TestFollowNodeVersionForbidden(t *testing.T) {
	client := fake.NewClientset()
	client.PrependReactor("list", "nodes", func(k8stesting.Action) (bool, runtime.Object, error) {
		return true, nil, apierrors.NewForbidden(schema.GroupResource{Resource: "nodes"}, "", fmt.Errorf("rbac"))
	})
	ua := prober.NewUserAgent("1.35")
	done := make(chan struct{})
	go func() {
		defer close(done)
		FollowKubeletVersion(context.Background(), fromclientset.New(client), "n1", ua)
	}()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("FollowKubeletVersion still running after a Forbidden list")
	}
	if ua.Version() != "1.35" {
		t.Errorf("version %q, want the one read at start", ua.Version())
	}
}
