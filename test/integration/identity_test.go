//go:build integration

package integration

import (
	"path/filepath"
	"strings"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/probed-dev/probed/test/harness/controlplane"
)

// kubeconfigForToken writes a kubeconfig that authenticates with token.
func (e *testEnv) kubeconfigForToken(token string) string {
	e.t.Helper()
	path := filepath.Join(e.t.TempDir(), "token.kubeconfig")
	if err := controlplane.WriteKubeconfig(path, cp.ConfigForToken(token)); err != nil {
		e.t.Fatal(err)
	}
	return path
}

// expectStartRefused runs probed and expects it to exit with an error
// whose log says each of want.
func (e *testEnv) expectStartRefused(want ...string) {
	e.t.Helper()
	p := e.startProbedNoWait()
	select {
	case <-p.Done():
	case <-time.After(30 * time.Second):
		e.t.Fatal("probed kept running with an identity the node-confinement policy would deny")
	}
	if p.ExitErr() == nil {
		e.t.Error("probed exited 0; want a failure")
	}
	b, _ := p.Output()
	for _, w := range want {
		if !strings.Contains(string(b), w) {
			e.t.Errorf("probed's log does not say %q:\n%s", w, b)
		}
	}
}

// Issue 12 item 5: a token without the node-name claim the admission
// policy needs would have every write denied; probed says so at start and
// exits, instead of running without effect.
func TestStartRefusesATokenWithoutTheNodeClaim(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	// A plain (not pod-bound) token of probed's service account.
	tr, err := client.CoreV1().ServiceAccounts("probed-system").CreateToken(e.ctx, "probed", &authenticationv1.TokenRequest{
		Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptrTo(int64(3600))},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	e.kubeconfig = e.kubeconfigForToken(tr.Status.Token)
	e.expectStartRefused("carries no authentication.kubernetes.io/node-name claim")
}

// A token bound to a pod on another node: probed's own node's pods would
// all be denied.
func TestStartRefusesATokenOfAnotherNode(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	other := newEnv(t)
	token, err := cp.TokenFor(e.ctx, "probed-system", "probed", "probed-"+other.node, "", other.node)
	if err != nil {
		t.Fatal(err)
	}
	e.kubeconfig = e.kubeconfigForToken(token)
	// klog quotes the error, so its own quotes come escaped.
	e.expectStartRefused("is bound to node", other.node, "but --node-name is", e.node)
}

// Issue 12 item 4: events have a client and a rate limit of their own. With
// the events client throttled to one event per 20 s, ten pods whose
// readiness fails from the first probe still get their conditions written
// at once; only the events wait. (On one shared client, the event flood
// would take its share of the status writes' budget, and here the events
// would not be held back at all.)
func TestEventsHaveTheirOwnRateLimit(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ip := loopbackIP()
	const n = 10
	var uids []string
	for i := range n {
		tg := startHTTPTarget(t, ip, false)
		pod := e.createPod("ev-"+itoa(int64(i)), mustJSON(probes{"app": {"readinessProbe": httpProbe(tg.Port, "/ready", map[string]any{"failureThreshold": 1})}}), true, container{name: "app"})
		e.runPod(pod, ip, time.Minute)
		uids = append(uids, string(pod.UID))
	}
	e.startProbed("--event-qps=0.05", "--event-burst=1")
	for i := range n {
		e.waitCond("ev-"+itoa(int64(i)), "ready.probed.io/app", v1.ConditionFalse, 20*time.Second)
	}
	unhealthy := 0
	for _, uid := range uids {
		for _, ev := range e.events(typesUID(uid)) {
			if ev.Reason == "Unhealthy" {
				unhealthy++
			}
		}
	}
	t.Logf("%d conditions written; %d Unhealthy events reached the API server meanwhile", n, unhealthy)
	if unhealthy > 2 {
		t.Errorf("%d Unhealthy events arrived within the events client's budget of one per 20 s (burst 1)", unhealthy)
	}
}

func ptrTo[T any](v T) *T { return &v }

// Issue 12 item 5: a readiness probe on a pod without the probed.io/ready
// gate silently does nothing for Services; probed raises a Warning on the
// pod (once) and counts it.
func TestMissingReadinessGateWarning(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ip := loopbackIP()
	tg := startHTTPTarget(t, ip, true)
	pod := e.createPod("nogate", mustJSON(probes{"app": {"readinessProbe": httpProbe(tg.Port, "/ready", nil)}}), false, container{name: "app"})
	e.runPod(pod, ip, time.Minute)
	p := e.startProbed()
	eventually(t, "the MissingReadinessGate Warning", 20*time.Second, func() bool {
		ev := e.findEvent(pod.UID, "MissingReadinessGate", "probed.io/ready")
		return ev != nil && ev.Type == v1.EventTypeWarning
	})
	if got := p.metricLines("probed_pods_without_readiness_gate 1"); len(got) != 1 {
		t.Errorf("probed_pods_without_readiness_gate: %v", p.metricLines("probed_pods_without_readiness_gate"))
	}
}
