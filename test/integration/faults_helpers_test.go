//go:build integration

package integration

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/probed-dev/probed/test/harness/controlplane"
	"github.com/probed-dev/probed/test/harness/faultproxy"
)

// A fault rig is one node's probed with faultReadyPods readiness pods, whose
// targets the test flips during a fault, and one liveness pod whose target
// always fails. probed runs with --liveness-action=event-only, so every kill
// is counted (probed_container_kills_total) without a runtime; the rig's
// kubelet loop restarts the liveness container after each kill, so every
// container instance must be killed exactly once.
const (
	faultReadyPods = 4
	faultLivePod   = "live"
	// faultConverge bounds convergence after a fault. After repeated
	// refused connections client-go's reflector waits 30 s plus up to as
	// much jitter before it watches again (reflector.go's defaultBackoff*),
	// so probed's informer may see a pod change up to 60 s late; the rest
	// is for a shared machine.
	faultConverge = 90 * time.Second
	// faultMinInstances is how many liveness container instances a fault
	// test wants killed before it counts kills per instance.
	faultMinInstances = 3
)

type faultRig struct {
	t     *testing.T
	e     *testEnv
	mode  string // --status-mode
	ready []*httpTarget
	p     *probedProc

	mu    sync.Mutex
	round int
	dups  []string // duplicate kills seen by the kubelet loop
	// readErr is why liveInstances last could not tell, for the failure.
	readErr error
	// api is the rig's own client of the API server, over HTTP/1.1: a
	// request that times out closes its connection, so a connection the
	// restarted API server left hanging costs one request, not the ~45 s
	// HTTP/2's ping takes to notice (the rig stalled that long, and failed
	// its one-minute convergence, on a loaded machine).
	api kubernetes.Interface
}

// http1Client is the admin client over HTTP/1.1, for the fault rig.
func http1Client(t *testing.T) kubernetes.Interface {
	t.Helper()
	cfg := cp.RESTConfig()
	cfg.QPS, cfg.Burst = 500, 1000
	cfg.TLSClientConfig.NextProtos = []string{"http/1.1"}
	c, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// newFaultRig creates the pods; start runs probed.
func newFaultRig(t *testing.T, mode string) *faultRig {
	t.Helper()
	r := &faultRig{t: t, e: newEnv(t), mode: mode, api: http1Client(t)}
	ip := loopbackIP()
	gates := mode == "conditions"
	for i := 0; i < faultReadyPods; i++ {
		tg := startHTTPTarget(t, ip, true)
		r.ready = append(r.ready, tg)
		pod := r.e.createPod(faultPodName(i), mustJSON(probes{"app": {"readinessProbe": httpProbe(tg.Port, "/ready",
			map[string]any{"failureThreshold": 1})}}), gates, container{name: "app"})
		r.e.runPod(pod, ip, time.Minute)
	}
	sick := startHTTPTarget(t, ip, false)
	pod := r.e.createPod(faultLivePod, mustJSON(probes{"app": {"livenessProbe": failingLiveness(sick.Port)}}), false, container{name: "app"})
	r.e.runPod(pod, ip, time.Minute)
	return r
}

func faultPodName(i int) string { return "r" + strconv.Itoa(i) }

// start runs probed with kubeconfig (the env's own if empty) and waits until
// the conditions match the targets and the first liveness kill is counted.
func (r *faultRig) start(kubeconfig string, extra ...string) {
	r.t.Helper()
	if kubeconfig != "" {
		r.e.kubeconfig = kubeconfig
	}
	// Plain HTTP without authentication: the faults cut probed off the API
	// server, which would then refuse the tests' reads of /metrics.
	args := append([]string{"--status-mode=" + r.mode, "--liveness-action=event-only", "--metrics-insecure-serving"}, extra...)
	r.p = r.e.startProbed(args...)
	r.waitConverged("start", time.Now(), 30*time.Second)
	eventually(r.t, "the first liveness kill", 30*time.Second, func() bool { return r.kills() == 1 })
}

// proxyKubeconfig authenticates as probed's service account, like the env's
// own kubeconfig, but through the proxy.
func (r *faultRig) proxyKubeconfig(px *faultproxy.Proxy) string {
	r.t.Helper()
	token, err := cp.TokenFor(r.e.ctx, "probed-system", "probed", "probed-"+r.e.node, "", r.e.node)
	if err != nil {
		r.t.Fatal(err)
	}
	path := filepath.Join(r.t.TempDir(), "proxied.kubeconfig")
	cfg := &rest.Config{Host: px.URL, BearerToken: token, TLSClientConfig: rest.TLSClientConfig{CAData: px.CAPEM}}
	if err := controlplane.WriteKubeconfig(path, cfg); err != nil {
		r.t.Fatal(err)
	}
	return path
}

// startProxy runs a fault proxy in front of the API server for this test.
func startFaultProxy(t *testing.T) *faultproxy.Proxy {
	t.Helper()
	ca, err := os.ReadFile(cp.CAFile)
	if err != nil {
		t.Fatal(err)
	}
	px, err := faultproxy.Start(faultproxy.Options{Upstream: cp.Host, UpstreamCAPEM: ca})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = px.Close() })
	return px
}

// flip moves the targets to the next round's health: every round changes
// some of them, and pods differ from each other.
func (r *faultRig) flip() {
	r.mu.Lock()
	r.round++
	k := r.round
	r.mu.Unlock()
	for i, tg := range r.ready {
		if (i+k)%3 != 0 {
			tg.Set(!tg.healthy.Load())
		}
	}
}

// flipEvery flips the targets every period until stop is called.
func (r *faultRig) flipEvery(period time.Duration) (stop func()) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		tick := time.NewTicker(period)
		defer tick.Stop()
		for {
			r.flip()
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
		}
	}()
	return func() { cancel(); <-done }
}

// mismatches lists the readiness pods whose status disagrees with their
// target's health, from the API server (not through any proxy).
func (r *faultRig) mismatches() []string {
	ctx, cancel := context.WithTimeout(r.e.ctx, 5*time.Second)
	defer cancel()
	list, err := r.api.CoreV1().Pods(r.e.ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return []string{err.Error()}
	}
	byName := map[string]*v1.Pod{}
	for i := range list.Items {
		byName[list.Items[i].Name] = &list.Items[i]
	}
	var bad []string
	for i, tg := range r.ready {
		name := faultPodName(i)
		want := v1.ConditionFalse
		if tg.healthy.Load() {
			want = v1.ConditionTrue
		}
		if got := r.observed(byName[name]); got != string(want) {
			bad = append(bad, fmt.Sprintf("%s: want %s, have %s", name, want, got))
		}
	}
	return bad
}

// observed renders what the pod's status says about readiness: one status
// when everything probed maintains agrees, else the parts.
func (r *faultRig) observed(p *v1.Pod) string {
	if p == nil {
		return "no pod"
	}
	status := func(t string) string {
		if c := condition(p, t); c != nil {
			return string(c.Status)
		}
		return "absent"
	}
	var parts []string
	if r.mode == "container-status" {
		ready := "absent"
		if len(p.Status.ContainerStatuses) > 0 {
			ready = string(boolCondition(p.Status.ContainerStatuses[0].Ready))
		}
		parts = []string{ready, status(string(v1.ContainersReady)), status(string(v1.PodReady))}
	} else {
		parts = []string{status("ready.probed.io/app"), status("probed.io/ready")}
	}
	for _, s := range parts[1:] {
		if s != parts[0] {
			return strings.Join(parts, "/")
		}
	}
	return parts[0]
}

func boolCondition(b bool) v1.ConditionStatus {
	if b {
		return v1.ConditionTrue
	}
	return v1.ConditionFalse
}

// waitConverged polls until every pod matches its target, and returns how
// long that took from since.
func (r *faultRig) waitConverged(what string, since time.Time, timeout time.Duration) time.Duration {
	r.t.Helper()
	var bad []string
	err := wait.PollUntilContextTimeout(r.e.ctx, 20*time.Millisecond, timeout, true, func(context.Context) (bool, error) {
		bad = r.mismatches()
		return len(bad) == 0, nil
	})
	if err != nil {
		r.t.Fatalf("%s: conditions did not converge within %v: %v", what, timeout, bad)
	}
	return time.Since(since)
}

// converged waits for convergence after a fault that ended at since and logs
// the time in the parsable form "converge: <fault> <duration>".
func (r *faultRig) converged(fault string, since time.Time) {
	r.t.Helper()
	d := r.waitConverged(fault, since, faultConverge)
	r.t.Logf("converge: %s %v", fault, d.Round(time.Millisecond))
}

// kills is probed's count of successful liveness kills.
func (r *faultRig) kills() int64 {
	for _, l := range r.p.metricLines("probed_container_kills_total{") {
		if strings.Contains(l, `outcome="success"`) && strings.Contains(l, `probe_type="Liveness"`) {
			f := strings.Fields(l)
			v, err := strconv.ParseFloat(f[len(f)-1], 64)
			if err == nil {
				return int64(v)
			}
		}
	}
	return -1
}

// liveInstances is how many instances the liveness container has had,
// from the API server; -1 if it cannot tell.
func (r *faultRig) liveInstances(ctx context.Context) int64 {
	// A request on a connection the restarted API server left behind can
	// hang until HTTP/2's ping notices (45 s): bound each one instead.
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	p, err := r.api.CoreV1().Pods(r.e.ns).Get(ctx, faultLivePod, metav1.GetOptions{})
	if err == nil && len(p.Status.ContainerStatuses) == 0 {
		err = fmt.Errorf("pod %s has no container statuses", faultLivePod)
	}
	if err != nil {
		r.mu.Lock()
		r.readErr = err
		r.mu.Unlock()
		return -1
	}
	return int64(p.Status.ContainerStatuses[0].RestartCount) + 1
}

// runKubelet restarts the liveness container each time probed has killed
// its current instance, as the kubelet would, until stop is called. It
// tolerates API errors (the API server may be down) and records a kill of an
// instance that was already killed.
func (r *faultRig) runKubelet() (stop func()) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		tick := time.NewTicker(50 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
			// Kills first: a kill of instance n happens after the pod has
			// it, so more kills than instances read afterwards is a duplicate.
			k := r.kills()
			n := r.liveInstances(ctx)
			switch {
			case n < 0 || k < 0:
			case k > n:
				r.mu.Lock()
				r.dups = append(r.dups, fmt.Sprintf("%d kills of %d instances", k, n))
				r.mu.Unlock()
			case k == n:
				r.tryRestart(ctx)
			}
		}
	}()
	// Stopping lets the loop reach a few instances first: a fault can hold
	// probed's informer in its backoff for most of the fault, and a check of
	// one kill per instance over only one or two instances proves little.
	return func() {
		_ = wait.PollUntilContextTimeout(r.e.ctx, 50*time.Millisecond, faultConverge, true, func(ctx context.Context) (bool, error) {
			return r.liveInstances(ctx) >= faultMinInstances, nil
		})
		cancel()
		<-done
	}
}

// tryRestart makes one attempt at a container restart; failures are retried
// by the next tick of the kubelet loop.
func (r *faultRig) tryRestart(ctx context.Context) {
	rctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	p, err := r.api.CoreV1().Pods(r.e.ns).Get(rctx, faultLivePod, metav1.GetOptions{})
	if err != nil || len(p.Status.ContainerStatuses) == 0 {
		return
	}
	cs := &p.Status.ContainerStatuses[0]
	cs.RestartCount++
	cs.ContainerID = fmt.Sprintf("containerd://%s-%s-%d", p.UID, cs.Name, cs.RestartCount)
	cs.State = v1.ContainerState{Running: &v1.ContainerStateRunning{StartedAt: metav1.Now()}}
	_, _ = r.api.CoreV1().Pods(r.e.ns).UpdateStatus(rctx, p, metav1.UpdateOptions{})
}

// checkKills waits until probed has killed the liveness container's last
// instance, logs how long that took after since, and checks that no instance
// was killed twice, then or for a while after.
func (r *faultRig) checkKills(fault string, since time.Time) {
	r.t.Helper()
	var k, n int64
	err := wait.PollUntilContextTimeout(r.e.ctx, 20*time.Millisecond, faultConverge, true, func(ctx context.Context) (bool, error) {
		k, n = r.kills(), r.liveInstances(ctx)
		return k == n && n > 0, nil
	})
	if err != nil {
		r.mu.Lock()
		readErr := r.readErr
		r.mu.Unlock()
		r.t.Fatalf("%s: %d liveness kills of %d container instances after %v; want one each (last read error: %v)", fault, k, n, faultConverge, readErr)
	}
	r.t.Logf("converge: %s/kills %v (%d instances, each killed once)", fault, time.Since(since).Round(time.Millisecond), n)
	if n < faultMinInstances {
		r.t.Errorf("%s: only %d liveness container instances; the kubelet loop hardly ran", fault, n)
	}
	consistently(r.t, "one kill per instance", 3*time.Second, func() bool { return r.kills() == n })
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.dups) > 0 {
		r.t.Errorf("%s: duplicate kills: %v", fault, r.dups)
	}
}

// checkHealthy checks that probed is still the process the test started,
// logged no panic or data race, still follows a flip, and exits cleanly.
func (r *faultRig) checkHealthy(fault string) {
	r.t.Helper()
	select {
	case <-r.p.Done():
		r.t.Fatalf("%s: probed exited during the fault: %v", fault, r.p.ExitErr())
	default:
	}
	r.flip()
	r.waitConverged(fault+": a flip after the fault", time.Now(), 20*time.Second)
	r.p.Shutdown()
	if r.p.ExitErr() != nil {
		r.t.Errorf("%s: probed exited with %v on SIGTERM", fault, r.p.ExitErr())
	}
	log, err := r.p.Output()
	if err != nil {
		r.t.Fatal(err)
	}
	for _, bad := range []string{"panic:", "WARNING: DATA RACE", "fatal error:"} {
		if strings.Contains(string(log), bad) {
			r.t.Errorf("%s: probed's log has %q", fault, bad)
		}
	}
}

// statusWrites is probed_status_writes_total for outcome.
func (r *faultRig) statusWrites(outcome string) int64 {
	for _, l := range r.p.metricLines(`probed_status_writes_total{outcome="` + outcome + `"}`) {
		f := strings.Fields(l)
		if v, err := strconv.ParseFloat(f[len(f)-1], 64); err == nil {
			return int64(v)
		}
	}
	return -1
}
