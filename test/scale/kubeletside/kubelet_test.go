//go:build scale

// Package kubeletside measures the other side of issue 16's comparison: what
// the kubelet alone writes for the same pods and transitions when it runs the
// probes itself. It starts a real node (test/harness/node: etcd,
// kube-apiserver, controller-manager, scheduler, containerd and a kubelet)
// and counts the kubelet's requests with the same FlowSchemas as the scale
// harness. It needs what the e2e tier needs (root, containerd, images).
package kubeletside

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes"

	"github.com/probed-dev/probed/test/harness/containerd"
	"github.com/probed-dev/probed/test/harness/controlplane"
	"github.com/probed-dev/probed/test/harness/node"
	"github.com/probed-dev/probed/test/scale/apiload"
)

const (
	targetImage = "probed.local/probe-target:latest"
	ns          = "default"
	// The same probe timings as the scale harness's pods.
	readyPeriod = 10
	livePeriod  = 10
)

// result is the JSON written to SCALE_KUBELET_OUT.
type result struct {
	Pods              int                `json:"transitionPods"`
	KillPods          int                `json:"killPods"`
	SteadySeconds     float64            `json:"steadySeconds"`
	Steady            map[string]float64 `json:"steady"`
	Transitions       int                `json:"transitions"`
	TransitionWindow  map[string]float64 `json:"transitionWindow"`
	PerTransition     perEvent           `json:"perTransition"`
	Kills             int                `json:"kills"`
	KillWindow        map[string]float64 `json:"killWindow"`
	PerKill           perEvent           `json:"perKill"`
	KubeletOtherPerMn float64            `json:"kubeletOtherRequestsPerMinute"`
	Config            config             `json:"config"`
	Storm             *stormResult       `json:"storm,omitempty"`
	KubeletRestart    *restartResult     `json:"kubeletRestart,omitempty"`
	APIServerRestart  *restartResult     `json:"apiserverRestart,omitempty"`
}

type perEvent struct {
	KubeletStatusWrites float64 `json:"kubeletStatusWrites"`
	KubeletEventWrites  float64 `json:"kubeletEventWrites"`
	PodWatchEvents      float64 `json:"podWatchEvents"`
}

func per(d apiload.Counters, n int) perEvent {
	f := float64(n)
	return perEvent{d.FS("kubelet", "status-write") / f, d.FS("kubelet", "event-write") / f, d["watchev Pod"] / f}
}

// TestKubeletAlone runs pods whose probes the kubelet runs (the same
// readiness and liveness timings as the scale harness's pods), and counts
// the kubelet's writes at steady state, per readiness transition and per
// liveness kill. Then, on SCALE_PODS site pods probed like the scale
// harness's, it runs the probed side's storm, a restart of the kubelet (the
// analog of restarting probed) and an apiserver restart.
func TestKubeletAlone(t *testing.T) {
	cfg, err := loadConfig()
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 18*time.Minute)
	defer cancel()
	n, err := node.Start(ctx, node.Options{Logf: t.Logf, Images: []string{"busybox", "pause", "probe-target"}})
	if errors.Is(err, controlplane.ErrBinaryMissing) || errors.Is(err, containerd.ErrMissingBinaries) {
		t.Skipf("skipping: %v", err)
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = n.Stop() })
	c := n.Client()
	if err := apiload.EnsureFlowSchemas(ctx, c); err != nil {
		t.Fatal(err)
	}
	const pods, killPods = 10, 3
	res := &result{Pods: pods, KillPods: killPods, Config: cfg}
	var names, kills []string
	for i := range pods {
		names = append(names, fmt.Sprintf("ready-%d", i))
		create(ctx, t, c, names[i], true)
	}
	for i := range killPods {
		kills = append(kills, fmt.Sprintf("live-%d", i))
		create(ctx, t, c, kills[i], false)
	}
	ips := waitPods(ctx, t, c, append(names, kills...), func(p *corev1.Pod) bool { return podReady(p) })
	settle(ctx, t, c)

	steady := 30 * time.Second
	d := measure(ctx, t, c, func() { time.Sleep(steady) })
	res.SteadySeconds, res.Steady = steady.Seconds(), d.NonZero()
	res.KubeletOtherPerMn = d.FS("kubelet", "other") / steady.Minutes()
	if w := d.Writes("kubelet"); w != 0 {
		t.Errorf("steady state: the kubelet wrote pod status or events %g times; want 0", w)
	}

	var quietPatchMs float64
	if cfg.Phases["transitions"] {
		d = measure(ctx, t, c, func() {
			post(t, ips, names, "/fail")
			waitPods(ctx, t, c, names, func(p *corev1.Pod) bool { return !podReady(p) })
			settle(ctx, t, c)
			post(t, ips, names, "/recover")
			waitPods(ctx, t, c, names, podReady)
			settle(ctx, t, c)
		})
		res.Transitions, res.TransitionWindow, res.PerTransition = 2*pods, d.NonZero(), per(d, 2*pods)
		quietPatchMs = patchMs(d)
	}

	if cfg.Phases["kills"] {
		d = measure(ctx, t, c, func() {
			post(t, ips, kills, "/fail")
			waitPods(ctx, t, c, kills, func(p *corev1.Pod) bool {
				return len(p.Status.ContainerStatuses) == 1 && p.Status.ContainerStatuses[0].RestartCount >= 1 && podReady(p)
			})
			settle(ctx, t, c)
		})
		res.Kills, res.KillWindow, res.PerKill = killPods, d.NonZero(), per(d, killPods)
	}

	if cfg.sitePhases() {
		// The site pods replace the first ones: SCALE_PODS=110 is the
		// kubelet's whole pod limit.
		deletePods(ctx, t, c, append(names, kills...))
		s := startSite(t)
		began := time.Now()
		sitePods := createSitePods(ctx, t, c, s, cfg.Pods)
		waitPods(ctx, t, c, sitePods, podReady)
		settle(ctx, t, c)
		t.Logf("%d site pods Ready in %v", cfg.Pods, time.Since(began).Round(time.Second))
		if cfg.Phases["storm"] {
			res.Storm = storm(ctx, t, c, s, sitePods, cfg.Storm)
			res.Storm.QuietPatchMs = quietPatchMs
		}
		if cfg.Phases["restart"] {
			res.KubeletRestart = kubeletRestart(ctx, t, n, sitePods)
		}
		if cfg.Phases["apiserver"] {
			res.APIServerRestart = apiserverRestart(ctx, t, n, sitePods)
		}
	}

	out := os.Getenv("SCALE_KUBELET_OUT")
	if out == "" {
		out = "../../../.cache/scale/kubelet.json"
	}
	b, _ := json.MarshalIndent(res, "", "  ")
	if err := os.MkdirAll(filepath.Dir(out), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(out, b, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("kubelet alone, written to %s:\n%s", out, b)
}

// create runs probe-target with the kubelet's own probes. A "ready" pod's
// readiness follows /healthz (POST /fail, /recover flip it) and its liveness
// is a TCP check; a "live" pod's liveness follows /healthz, so POST /fail
// gets it killed and restarted healthy.
func create(ctx context.Context, t *testing.T, c kubernetes.Interface, name string, ready bool) {
	t.Helper()
	httpProbe := func(period, failures int32) *corev1.Probe {
		return &corev1.Probe{ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/healthz", Port: intstr.FromInt32(8080)}},
			PeriodSeconds: period, FailureThreshold: failures, TimeoutSeconds: 2}
	}
	tcpProbe := func(period, failures int32) *corev1.Probe {
		return &corev1.Probe{ProbeHandler: corev1.ProbeHandler{TCPSocket: &corev1.TCPSocketAction{Port: intstr.FromInt32(8080)}},
			PeriodSeconds: period, FailureThreshold: failures, TimeoutSeconds: 2}
	}
	ctr := corev1.Container{Name: "app", Image: targetImage, ImagePullPolicy: corev1.PullNever, Args: []string{"--http=:8080"},
		Ports: []corev1.ContainerPort{{ContainerPort: 8080}}}
	if ready {
		ctr.ReadinessProbe, ctr.LivenessProbe = httpProbe(readyPeriod, 1), tcpProbe(livePeriod, 3)
	} else {
		ctr.ReadinessProbe, ctr.LivenessProbe = tcpProbe(readyPeriod, 1), httpProbe(livePeriod, 3)
	}
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: corev1.PodSpec{TerminationGracePeriodSeconds: ptr(int64(1)), Containers: []corev1.Container{ctr}}}
	if _, err := c.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

func post(t *testing.T, ips map[string]string, names []string, path string) {
	t.Helper()
	hc := http.Client{Timeout: 5 * time.Second}
	for _, name := range names {
		resp, err := hc.Post("http://"+ips[name]+":8080"+path, "text/plain", nil)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
	}
}

// waitPods polls until ok holds for every named pod; it returns their IPs.
func waitPods(ctx context.Context, t *testing.T, c kubernetes.Interface, names []string, ok func(*corev1.Pod) bool) map[string]string {
	t.Helper()
	deadline := time.Now().Add(6 * time.Minute)
	for {
		ips := map[string]string{}
		list, err := c.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
		if err == nil {
			for i := range list.Items {
				if p := &list.Items[i]; ok(p) {
					ips[p.Name] = p.Status.PodIP
				}
			}
			all := true
			for _, n := range names {
				if _, found := ips[n]; !found {
					all = false
				}
			}
			if all {
				return ips
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("pods %v: condition not reached within 6m (%d match)", names, len(ips))
		}
		time.Sleep(200 * time.Millisecond)
	}
}

func podReady(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

func scrape(ctx context.Context, t *testing.T, c kubernetes.Interface) apiload.Counters {
	t.Helper()
	m, err := apiload.Scrape(ctx, c)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// settle waits until the kubelet has not written pod status for 5 s.
func settle(ctx context.Context, t *testing.T, c kubernetes.Interface) {
	t.Helper()
	last, changed := scrape(ctx, t, c), time.Now()
	deadline := time.Now().Add(2 * time.Minute)
	for time.Since(changed) < 5*time.Second {
		if time.Now().After(deadline) {
			t.Fatal("kubelet status writes did not stop within 2m")
		}
		time.Sleep(time.Second)
		m := scrape(ctx, t, c)
		if m.FS("kubelet", "status-write") != last.FS("kubelet", "status-write") {
			changed = time.Now()
		}
		last = m
	}
}

func measure(ctx context.Context, t *testing.T, c kubernetes.Interface, fn func()) apiload.Counters {
	t.Helper()
	base := scrape(ctx, t, c)
	fn()
	return scrape(ctx, t, c).Sub(base)
}

func ptr[T any](v T) *T { return &v }
