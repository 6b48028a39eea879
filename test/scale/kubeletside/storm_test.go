//go:build scale

package kubeletside

import (
	"context"
	"sort"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/probed-dev/probed/test/scale/apiload"
)

// stormResult is the probed side's storm, with the kubelet running the probes.
type stormResult struct {
	Pods          int                `json:"pods"`
	Failing       int                `json:"failingPods"`
	Seconds       float64            `json:"seconds"`
	Window        map[string]float64 `json:"window"`
	EventWritesPS float64            `json:"kubeletEventWritesPerS"`
	StatusWritesS float64            `json:"kubeletStatusWritesPerS"`
	Kills         int                `json:"livenessKills"`
	// DownSeconds is, per failing pod, from the storm's start until its
	// Ready=False was seen (polled every 250 ms): the condition latency.
	DownSeconds []float64 `json:"secondsToNotReady"`
	// PatchMs is the apiserver's mean time per kubelet status patch in the
	// storm; QuietPatchMs the same in the transitions phase, for comparison.
	PatchMs      float64  `json:"apiserverMsPerStatusPatch"`
	QuietPatchMs float64  `json:"apiserverMsPerStatusPatchTransitions,omitempty"`
	OthersFlip   []string `json:"healthyPodsWhoseReadyFlipped"`
	RecoverSecs  float64  `json:"secondsToAllReadyAfter"`
}

func patchMs(d apiload.Counters) float64 {
	if n := d["lat PATCH pods/status count"]; n > 0 {
		return 1000 * d["lat PATCH pods/status sum"] / n
	}
	return 0
}

// storm fails every probe of 10 % of the pods (at least one) for d, as the
// probed side's storm does, and counts what the kubelet writes.
func storm(ctx context.Context, t *testing.T, c kubernetes.Interface, s *site, pods []string, d time.Duration) *stormResult {
	nFail := max(1, len(pods)/10)
	failing, healthy := pods[:nFail], pods[nFail:]
	r := &stormResult{Pods: len(pods), Failing: nFail, Seconds: d.Seconds()}
	before := marks(ctx, t, c, pods)
	var delta apiload.Counters
	delta = measure(ctx, t, c, func() {
		start := time.Now()
		s.setFailing(failing, true)
		down := map[string]float64{}
		for time.Since(start) < d {
			if list, err := c.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{}); err == nil {
				for i := range list.Items {
					p := &list.Items[i]
					if _, seen := down[p.Name]; !seen && !podReady(p) && contains(failing, p.Name) {
						down[p.Name] = time.Since(start).Seconds()
					}
				}
			}
			time.Sleep(250 * time.Millisecond)
		}
		for _, v := range down {
			r.DownSeconds = append(r.DownSeconds, v)
		}
		sort.Float64s(r.DownSeconds)
	})
	after := marks(ctx, t, c, pods)
	r.Window = delta.NonZero()
	r.EventWritesPS = delta.FS("kubelet", "event-write") / d.Seconds()
	r.StatusWritesS = delta.FS("kubelet", "status-write") / d.Seconds()
	r.PatchMs = patchMs(delta)
	_, r.Kills = changes(before, after)
	hb, ha := map[string]mark{}, map[string]mark{}
	for _, n := range healthy {
		hb[n], ha[n] = before[n], after[n]
	}
	r.OthersFlip, _ = changes(hb, ha)

	recover := time.Now()
	s.setFailing(failing, false)
	waitPods(ctx, t, c, pods, podReady)
	settle(ctx, t, c)
	r.RecoverSecs = time.Since(recover).Seconds()

	if r.Kills < 1 {
		t.Errorf("storm: no liveness kill in %v of failing probes on %d pods", d, nFail)
	}
	if len(r.DownSeconds) != nFail {
		t.Errorf("storm: %d of %d failing pods seen not Ready", len(r.DownSeconds), nFail)
	}
	if delta.FS("kubelet", "event-write") < 1 {
		t.Error("storm: no event write by the kubelet counted")
	}
	t.Logf("storm: %d of %d pods failing for %v: %d kills, kubelet %.2f event writes/s, %.2f status writes/s, %.1f ms per status patch; not Ready after %v s",
		nFail, len(pods), d, r.Kills, r.EventWritesPS, r.StatusWritesS, r.PatchMs, r.DownSeconds)
	return r
}

func contains(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}
