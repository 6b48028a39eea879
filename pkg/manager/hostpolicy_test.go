package manager

import (
	"context"
	"net/netip"
	"strings"
	"sync"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/probed-dev/probed/internal/informertest"
	"github.com/probed-dev/probed/pkg/hostpolicy"
	"github.com/probed-dev/probed/pkg/prober"
	"github.com/probed-dev/probed/pkg/probespec"
	"github.com/probed-dev/probed/pkg/results"
	"github.com/probed-dev/probed/pkg/status"
	"github.com/probed-dev/probed/pkg/worker"
)

// newEnvWith is newEnv with extra manager options.
func newEnvWith(t *testing.T, mutate func(*Options)) *env {
	t.Helper()
	client := fake.NewClientset()
	watching := informertest.WatchStarted(client, "pods")
	factory := informers.NewSharedInformerFactory(client, 0)
	e := &env{
		t: t, client: client,
		sink:   &sink{states: map[types.UID]status.PodState{}, forgot: map[types.UID]bool{}},
		rec:    &recorder{},
		prober: &fakeProber{result: map[string]results.Result{}, calls: map[string]int{}},
		done:   make(chan struct{}),
	}
	o := Options{
		Informer:    factory.Core().V1().Pods().Informer(),
		Source:      probespec.ProbeSourceAnnotation,
		Prober:      e.prober,
		Recorder:    e.rec,
		Status:      e.sink,
		DaemonStart: time.Now().Add(-time.Hour),
		// A cluster with deploy/'s probe-reach policy.
		ReachPolicy: &fakeReachPolicy{inForce: true},
	}
	mutate(&o)
	mgr, err := New(o)
	if err != nil {
		t.Fatal(err)
	}
	e.mgr = mgr
	ctx, cancel := context.WithCancel(context.Background())
	e.cancel = cancel
	factory.Start(ctx.Done())
	factory.WaitForCacheSync(ctx.Done())
	informertest.Wait(t, watching)
	go func() { defer close(e.done); mgr.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		<-e.done
		factory.Shutdown()
	})
	return e
}

func (r *recorder) messages(reason string) []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []string
	for _, e := range r.events {
		if e.reason == reason {
			out = append(out, e.message)
		}
	}
	return out
}

func testGuard(policy hostpolicy.Policy) *hostpolicy.Guard {
	return hostpolicy.NewGuard(policy, hostpolicy.GuardOptions{
		InterfaceAddrs: func() ([]netip.Addr, error) { return []netip.Addr{netip.MustParseAddr("10.9.9.9")}, nil },
	})
}

func httpHost(host string) map[string]any {
	return map[string]any{"httpGet": map[string]any{"host": host, "port": 8080}, "periodSeconds": 1}
}

func tcpHost(host string) map[string]any {
	return map[string]any{"tcpSocket": map[string]any{"host": host, "port": 8080}, "periodSeconds": 1}
}

func TestHostPolicyProblems(t *testing.T) {
	pod := runningPod("p", "u1", "", "app")
	pod.Status.PodIP = "127.0.0.9"
	pod.Status.PodIPs = []v1.PodIP{{IP: "127.0.0.9"}, {IP: "fd00::9"}}
	probe := func(c, typ string, p map[string]any) probespec.DeclaredProbe {
		pod := pod.DeepCopy()
		pod.Annotations = map[string]string{probespec.ProbesAnnotation: annotate(map[string]map[string]any{c: {typ: p}})}
		d, problems := probespec.DeclaredProbes(pod, probespec.ProbeSourceAnnotation)
		if len(d) != 1 || len(problems) != 0 {
			t.Fatalf("declared %v, problems %v", d, problems)
		}
		return d[0]
	}
	declared := []probespec.DeclaredProbe{
		probe("app", "readinessProbe", httpHost("169.254.169.254")),
		probe("app", "livenessProbe", tcpHost("127.0.0.5")),
		probe("app", "startupProbe", httpHost("127.0.0.9")), // the pod's own IP
	}
	cases := []struct {
		policy hostpolicy.Policy
		kept   int
		want   []string
	}{
		{hostpolicy.DenyNodeLocal, 1, []string{
			`container "app" readinessProbe: httpGet.host: Forbidden: 169.254.169.254 is link-local/metadata, refused by --probe-host-policy=deny-node-local`,
			`container "app" livenessProbe: tcpSocket.host: Forbidden: 127.0.0.5 is loopback, refused by --probe-host-policy=deny-node-local`,
		}},
		{hostpolicy.PodIPs, 1, []string{
			`container "app" readinessProbe: httpGet.host: Forbidden: 169.254.169.254 is not one of the pod's IPs, refused by --probe-host-policy=pod-ips`,
			`container "app" livenessProbe: tcpSocket.host: Forbidden: 127.0.0.5 is not one of the pod's IPs, refused by --probe-host-policy=pod-ips`,
		}},
		{hostpolicy.Kubelet, 3, nil},
	}
	for _, tc := range cases {
		t.Run(string(tc.policy), func(t *testing.T) {
			kept, problems := hostPolicyProblems(testGuard(tc.policy), pod, worker.PodIPs(pod), declared, nil)
			if len(kept) != tc.kept {
				t.Errorf("kept %d probes; want %d", len(kept), tc.kept)
			}
			var got []string
			for _, p := range problems {
				got = append(got, p.String())
			}
			if strings.Join(got, "\n") != strings.Join(tc.want, "\n") {
				t.Errorf("problems:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(tc.want, "\n"))
			}
		})
	}
	// Without a guard nothing is checked.
	if kept, problems := hostPolicyProblems(nil, pod, worker.PodIPs(pod), declared, nil); len(kept) != 3 || len(problems) != 0 {
		t.Errorf("nil guard: kept %d, problems %v", len(kept), problems)
	}
	// Names are left to the prober, which judges what they resolve to.
	named := []probespec.DeclaredProbe{probe("app", "readinessProbe", httpHost("localhost"))}
	if kept, problems := hostPolicyProblems(testGuard(hostpolicy.DenyNodeLocal), pod, worker.PodIPs(pod), named, nil); len(kept) != 1 || len(problems) != 0 {
		t.Errorf("name: kept %d, problems %v", len(kept), problems)
	}
	// Until the pod has an IP nothing is judged: its own IPs are always
	// allowed, and a hostNetwork pod's IP is the node's.
	noIP := pod.DeepCopy()
	noIP.Status.PodIP, noIP.Status.PodIPs = "", nil
	if kept, problems := hostPolicyProblems(testGuard(hostpolicy.DenyNodeLocal), noIP, worker.PodIPs(noIP), declared, nil); len(kept) != 3 || len(problems) != 0 {
		t.Errorf("no pod IP: kept %d, problems %v", len(kept), problems)
	}
	// A hostNetwork pod probing the node's address by its own IP.
	hostNet := pod.DeepCopy()
	hostNet.Status.PodIP, hostNet.Status.PodIPs = "10.9.9.9", []v1.PodIP{{IP: "10.9.9.9"}}
	nodeProbe := []probespec.DeclaredProbe{probe("app", "readinessProbe", httpHost("10.9.9.9"))}
	if kept, problems := hostPolicyProblems(testGuard(hostpolicy.DenyNodeLocal), hostNet, worker.PodIPs(hostNet), nodeProbe, nil); len(kept) != 1 || len(problems) != 0 {
		t.Errorf("hostNetwork pod's own IP: kept %d, problems %v", len(kept), problems)
	}
	if kept, problems := hostPolicyProblems(testGuard(hostpolicy.DenyNodeLocal), pod, worker.PodIPs(pod), nodeProbe, nil); len(kept) != 0 || len(problems) != 1 ||
		!strings.Contains(problems[0].String(), "10.9.9.9 is an address of this node") {
		t.Errorf("node address: kept %d, problems %v", len(kept), problems)
	}
}

// TestHostPolicyInManager: a refused probe is an InvalidProbe problem, with
// the readiness condition False (InvalidProbe), and does not run; the same
// pod's allowed probes run.
func TestHostPolicyInManager(t *testing.T) {
	e := newEnvWith(t, func(o *Options) { o.HostGuard = testGuard(hostpolicy.DenyNodeLocal) })
	pod := runningPod("p", "u1", annotate(map[string]map[string]any{
		"app":   {"readinessProbe": httpHost("169.254.169.254"), "livenessProbe": tcpHost("127.0.0.5")},
		"other": {"readinessProbe": httpHost("127.0.0.9")},
	}), "app", "other")
	pod.Status.PodIP = "127.0.0.9"
	pod.Status.PodIPs = []v1.PodIP{{IP: "127.0.0.9"}}
	e.create(pod)
	e.eventually("InvalidProbe condition", func() bool {
		c, ok := e.sink.container("u1", "app")
		return ok && !c.Ready && c.ReadyReason == status.ReasonInvalidProbe &&
			strings.Contains(c.ReadyMessage, "169.254.169.254 is link-local/metadata")
	})
	e.eventually("two InvalidProbe events", func() bool { return e.rec.count(ReasonInvalidProbe) == 2 })
	msgs := strings.Join(e.rec.messages(ReasonInvalidProbe), "\n")
	for _, want := range []string{
		`container "app" readinessProbe: httpGet.host: Forbidden: 169.254.169.254 is link-local/metadata, refused by --probe-host-policy=deny-node-local`,
		`container "app" livenessProbe: tcpSocket.host: Forbidden: 127.0.0.5 is loopback, refused by --probe-host-policy=deny-node-local`,
	} {
		if !strings.Contains(msgs, want) {
			t.Errorf("events:\n%s\nlack %q", msgs, want)
		}
	}
	e.eventually("the allowed probe ready", func() bool {
		c, ok := e.sink.container("u1", "other")
		return ok && c.Ready
	})
	if w := e.workers(); len(w) != 1 || w["p/other/Readiness"] == "" {
		t.Errorf("workers = %v; want only other's readiness", w)
	}
}

// TestHostPolicyWaitsForPodIP: a pod without an IP is judged once it has one.
func TestHostPolicyWaitsForPodIP(t *testing.T) {
	e := newEnvWith(t, func(o *Options) { o.HostGuard = testGuard(hostpolicy.PodIPs) })
	pod := runningPod("p", "u1", annotate(map[string]map[string]any{"app": {"readinessProbe": tcpHost("10.1.2.3")}}), "app")
	pod.Status.PodIP = ""
	e.create(pod)
	e.eventually("worker started", func() bool { return e.mgr.WorkerCount() == 1 })
	pod.Status.PodIP = "10.1.2.4"
	pod.Status.PodIPs = []v1.PodIP{{IP: "10.1.2.4"}}
	e.update(pod)
	e.eventually("worker stopped", func() bool { return e.mgr.WorkerCount() == 0 })
	e.eventually("InvalidProbe", func() bool { return e.rec.count(ReasonInvalidProbe) == 1 })
	if m := e.rec.messages(ReasonInvalidProbe)[0]; !strings.Contains(m, "10.1.2.3 is not one of the pod's IPs, refused by --probe-host-policy=pod-ips") {
		t.Errorf("event %q", m)
	}
}

// targetProber records the targets it is given.
type targetProber struct {
	mu      sync.Mutex
	targets []prober.Target
}

func (p *targetProber) Probe(_ context.Context, _ probespec.ProbeType, _ *v1.Probe, target prober.Target, _ prober.EventSink) (results.Result, string, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.targets = append(p.targets, target)
	return results.Success, "", nil
}
