//go:build scale

package kubeletside

import (
	"context"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/probed-dev/probed/test/harness/node"
	"github.com/probed-dev/probed/test/scale/apiload"
)

// observation is how long after a restart flips are still looked for: two
// readiness periods, as on the probed side.
const observation = 2 * readyPeriod * time.Second

// restartResult is one restart: of the kubelet, or of the apiserver with the
// kubelet reconnecting.
type restartResult struct {
	Pods int `json:"pods"`
	// OutageSeconds is how long the process was down: the kubelet's SIGTERM
	// to exit, or the apiserver's planned 5 s.
	OutageSeconds float64 `json:"outageSeconds"`
	// StartSeconds is the apiserver's start until /readyz (apiserver only).
	StartSeconds float64 `json:"startSeconds,omitempty"`
	// PodWatchSeconds is from the new process's start (kubelet) or the new
	// apiserver's readiness until the kubelet's pod watch is open again.
	PodWatchSeconds float64 `json:"secondsToPodWatch"`
	// NodeStatusSeconds is from the restart until the kubelet's first node
	// status after it (heartbeats have 1 s resolution).
	NodeStatusSeconds float64 `json:"secondsToNodeStatus"`
	// FirstWriteSeconds and LastWriteSeconds are from the restart until the
	// kubelet's first and last pod status write (polled every 500 ms; 0: none).
	FirstWriteSeconds float64  `json:"secondsToFirstStatusWrite"`
	LastWriteSeconds  float64  `json:"secondsToLastStatusWrite"`
	PodsFlipped       []string `json:"podsWhoseReadyFlipped"`
	Restarts          int      `json:"containerRestarts"`
	// The kubelet's requests over the whole phase (since the new apiserver
	// started, for the apiserver restart).
	Requests      map[string]float64 `json:"requests"`
	PodLists      float64            `json:"kubeletPodListsAndGets"`
	PodWatches    float64            `json:"kubeletPodWatches"`
	StatusWrites  float64            `json:"kubeletStatusWrites"`
	EventWrites   float64            `json:"kubeletEventWrites"`
	OtherRequests float64            `json:"kubeletOtherRequests"`
}

func (r *restartResult) count(d apiload.Counters) {
	r.Requests = d.NonZero()
	r.PodLists, r.PodWatches = d.FS("kubelet", "pod-list"), d.FS("kubelet", "pod-watch")
	r.StatusWrites, r.EventWrites = d.FS("kubelet", "status-write"), d.FS("kubelet", "event-write")
	r.OtherRequests = d.FS("kubelet", "other")
}

// kubeletRestart restarts the kubelet, the analog of restarting probed: its
// containers keep running, it lists and watches its pods again and
// recomputes their status, probes included.
func kubeletRestart(ctx context.Context, t *testing.T, n *node.Node, pods []string) *restartResult {
	c := n.Client()
	r := &restartResult{Pods: len(pods)}
	before := marks(ctx, t, c, pods)
	base := scrape(ctx, t, c)
	stop := time.Now()
	if err := n.RestartKubelet(); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	r.OutageSeconds = start.Sub(stop).Seconds()
	r.PodWatchSeconds = waitPodWatch(ctx, t, c, base, start)
	r.NodeStatusSeconds = waitNodeStatus(ctx, t, c, start)
	r.FirstWriteSeconds, r.LastWriteSeconds = statusWrites(ctx, t, c, pods, base, start)
	r.count(scrape(ctx, t, c).Sub(base))
	r.PodsFlipped, r.Restarts = changes(before, marks(ctx, t, c, pods))
	if r.PodLists < 1 || r.PodWatches < 1 {
		t.Errorf("kubelet restart: counted %g pod lists and %g pod watches by the kubelet; want at least 1 each", r.PodLists, r.PodWatches)
	}
	if r.Restarts != 0 {
		t.Errorf("kubelet restart: %d containers restarted; the kubelet must leave running containers alone", r.Restarts)
	}
	t.Logf("kubelet restart: down %.1fs, pod watch %.1fs, node status %.1fs, status writes %.1fs to %.1fs after start; %d pods flipped; requests:%s",
		r.OutageSeconds, r.PodWatchSeconds, r.NodeStatusSeconds, r.FirstWriteSeconds, r.LastWriteSeconds, len(r.PodsFlipped), scrape(ctx, t, c).Sub(base))
	return r
}

// apiserverOutage is the probed side's: long enough for every watch to break.
const apiserverOutage = 5 * time.Second

// apiserverRestart stops the node's kube-apiserver for 5 s, starts it again
// and counts what the kubelet does to reconnect. The new apiserver's counters
// start at zero, so they are the reconnection load.
func apiserverRestart(ctx context.Context, t *testing.T, n *node.Node, pods []string) *restartResult {
	c, cp := n.Client(), n.ControlPlane()
	r := &restartResult{Pods: len(pods), OutageSeconds: apiserverOutage.Seconds()}
	before := marks(ctx, t, c, pods)
	if err := cp.StopAPIServer(); err != nil {
		t.Fatal(err)
	}
	time.Sleep(apiserverOutage)
	start := time.Now()
	if err := cp.StartAPIServer(ctx); err != nil {
		t.Fatal(err)
	}
	up := time.Now()
	r.StartSeconds = up.Sub(start).Seconds()
	r.PodWatchSeconds = waitPodWatch(ctx, t, c, apiload.Counters{}, up)
	r.NodeStatusSeconds = waitNodeStatus(ctx, t, c, up)
	r.FirstWriteSeconds, r.LastWriteSeconds = statusWrites(ctx, t, c, pods, apiload.Counters{}, up)
	r.count(scrape(ctx, t, c))
	r.PodsFlipped, r.Restarts = changes(before, marks(ctx, t, c, pods))
	if r.PodLists < 1 {
		t.Errorf("apiserver restart: counted %g pod lists by the kubelet; want at least 1", r.PodLists)
	}
	t.Logf("apiserver restart: started in %.1fs; kubelet pod watch %.1fs, node status %.1fs later; %d pods flipped; requests since:%s",
		r.StartSeconds, r.PodWatchSeconds, r.NodeStatusSeconds, len(r.PodsFlipped), scrape(ctx, t, c))
	return r
}

// waitPodWatch polls until the kubelet has opened a pod watch since base and
// returns the seconds since from.
func waitPodWatch(ctx context.Context, t *testing.T, c kubernetes.Interface, base apiload.Counters, from time.Time) float64 {
	t.Helper()
	deadline := time.Now().Add(3 * time.Minute)
	for {
		if m, err := apiload.Scrape(ctx, c); err == nil && m.Sub(base).FS("kubelet", "pod-watch") >= 1 {
			return time.Since(from).Seconds()
		}
		if time.Now().After(deadline) {
			t.Fatal("the kubelet's pod watch not back within 3m")
		}
		time.Sleep(250 * time.Millisecond)
	}
}

// waitNodeStatus polls until the node's Ready condition carries a heartbeat
// later than from, and returns the seconds since from.
func waitNodeStatus(ctx context.Context, t *testing.T, c kubernetes.Interface, from time.Time) float64 {
	t.Helper()
	deadline := time.Now().Add(3 * time.Minute)
	for {
		if nd, err := c.CoreV1().Nodes().Get(ctx, node.NodeName, metav1.GetOptions{}); err == nil {
			for _, cond := range nd.Status.Conditions {
				if cond.Type == corev1.NodeReady && cond.Status == corev1.ConditionTrue && cond.LastHeartbeatTime.After(from) {
					return time.Since(from).Seconds()
				}
			}
		}
		if time.Now().After(deadline) {
			t.Fatal("no Ready node status from the kubelet within 3m")
		}
		time.Sleep(250 * time.Millisecond)
	}
}

// statusWrites polls the kubelet's pod status writes (counted from base)
// every 500 ms for the observation window, then until every pod is Ready and
// 5 s have passed without one. It returns the seconds from from to the first
// and the last write seen, 0 if none.
func statusWrites(ctx context.Context, t *testing.T, c kubernetes.Interface, pods []string, base apiload.Counters, from time.Time) (first, last float64) {
	t.Helper()
	begin, changed := time.Now(), time.Now()
	prev := scrape(ctx, t, c).Sub(base).FS("kubelet", "status-write")
	if prev > 0 {
		first, last = time.Since(from).Seconds(), time.Since(from).Seconds()
	}
	deadline := begin.Add(4 * time.Minute)
	for time.Since(begin) < observation || time.Since(changed) < 5*time.Second || !allReady(ctx, c, pods) {
		if time.Now().After(deadline) {
			t.Fatal("pods not all Ready, or kubelet status writes not over, within 4m")
		}
		time.Sleep(500 * time.Millisecond)
		if w := scrape(ctx, t, c).Sub(base).FS("kubelet", "status-write"); w != prev {
			changed, prev = time.Now(), w
			if first == 0 {
				first = time.Since(from).Seconds()
			}
			last = time.Since(from).Seconds()
		}
	}
	return first, last
}

func allReady(ctx context.Context, c kubernetes.Interface, pods []string) bool {
	list, err := c.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return false
	}
	ready := 0
	for i := range list.Items {
		if contains(pods, list.Items[i].Name) && podReady(&list.Items[i]) {
			ready++
		}
	}
	return ready == len(pods)
}
