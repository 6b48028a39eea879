//go:build scale

package scale

import (
	"time"

	"github.com/probed-dev/probed/test/scale/apiload"
)

// result is the JSON written to SCALE_OUT; docs/scale.md quotes it.
type result struct {
	Config             config             `json:"config"`
	Started            time.Time          `json:"started"`
	Finished           time.Time          `json:"finished"`
	SetupSeconds       float64            `json:"setupSeconds"`
	ControlPlaneIdle   map[string]float64 `json:"controlPlaneIdleRSSMiB"`
	ProbedRSSMiB       float64            `json:"probedMeanRSSMiB"`
	Steady             window             `json:"steady"`
	SteadyPerNodeMin   perNodeMinute      `json:"steadyPerNodePerMinute"`
	Transitions        *transitionResult  `json:"transitions,omitempty"`
	Kills              *killResult        `json:"kills,omitempty"`
	Storm              *stormResult       `json:"storm,omitempty"`
	Restart            *restartResult     `json:"rollingRestart,omitempty"`
	APIServer          *apiserverResult   `json:"apiserverRestart,omitempty"`
	KubeletWriteErrors int64              `json:"kubeletWriteErrors"`
}

// perNodeMinute is requests per node per minute, by identity and class.
type perNodeMinute struct {
	ProbedRequests  float64 `json:"probedRequests"`
	ProbedWrites    float64 `json:"probedWrites"`
	KubeletWrites   float64 `json:"kubeletWrites"`
	PodWatchEvents  float64 `json:"podWatchEvents"`
	CPUCoresPerNode float64 `json:"apiserverCPUCoresPerNode"`
}

func (r *result) steadyFigures(cfg config) {
	d := r.Steady.delta
	per := float64(cfg.Nodes) * r.Steady.Seconds / 60
	var probed float64
	for _, rc := range apiload.RequestClasses {
		probed += d.FS("probed", rc.Name)
	}
	r.SteadyPerNodeMin = perNodeMinute{
		ProbedRequests:  probed / per,
		ProbedWrites:    d.Writes("probed") / per,
		KubeletWrites:   d.Writes("kubelet") / per,
		PodWatchEvents:  d["watchev Pod"] / per,
		CPUCoresPerNode: r.Steady.CPUCores["kube-apiserver"] / float64(cfg.Nodes),
	}
}

// perEvent is one identity's writes divided by the number of events
// (transitions, kills) that caused them.
type perEvent struct {
	ProbedStatusWrites  float64 `json:"probedStatusWrites"`
	ProbedEventWrites   float64 `json:"probedEventWrites"`
	KubeletStatusWrites float64 `json:"kubeletStatusWrites"`
	PodWatchEvents      float64 `json:"podWatchEvents"`
	EventWatchEvents    float64 `json:"eventWatchEvents"`
}

func divide(d apiload.Counters, n int) perEvent {
	if n == 0 {
		return perEvent{}
	}
	f := float64(n)
	return perEvent{
		ProbedStatusWrites:  d.FS("probed", "status-write") / f,
		ProbedEventWrites:   d.FS("probed", "event-write") / f,
		KubeletStatusWrites: d.FS("kubelet", "status-write") / f,
		PodWatchEvents:      d["watchev Pod"] / f,
		EventWatchEvents:    d["watchev Event"] / f,
	}
}

// applyLatency is the apiserver's mean time for probed's condition writes
// (server-side apply on pods/status, verb APPLY, which only probed uses).
func applyLatency(d apiload.Counters) float64 {
	if n := d["lat APPLY pods/status count"]; n > 0 {
		return d["lat APPLY pods/status sum"] / n
	}
	return 0
}
