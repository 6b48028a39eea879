//go:build scale

package scale

import (
	"time"

	v1 "k8s.io/api/core/v1"

	"github.com/probed-dev/probed/test/scale/apiload"
)

// add sums two windows' apiload.Counters.
func add(a, b apiload.Counters) apiload.Counters {
	out := apiload.Counters{}
	for k, v := range a {
		out[k] += v
	}
	for k, v := range b {
		out[k] += v
	}
	return out
}

type transitionResult struct {
	Pods          int       `json:"pods"`
	Transitions   int       `json:"transitions"`
	Down          window    `json:"down"`
	Up            window    `json:"up"`
	PerTransition perEvent  `json:"perTransition"`
	DownLatency   latencies `json:"downLatencySeconds"` // target fails → gate False seen
	UpLatency     latencies `json:"upLatencySeconds"`   // target heals → gate True seen
	// APIServerApplySeconds is the apiserver's mean handling time of
	// probed's condition writes in the phase.
	APIServerApplySeconds float64 `json:"apiserverApplySeconds"`
}

// transitions fails the readiness target of cfg.Transitions pods per node,
// waits for probed's gate and the kubelet's Ready to follow, then heals them.
func (f *fleet) transitions(cfg config) *transitionResult {
	keys := f.pick(0, cfg.Transitions, 0)
	r := &transitionResult{Pods: len(keys), Transitions: 2 * len(keys)}
	var from time.Time
	r.Down = f.measure(func() {
		from = time.Now()
		f.setFailing("ready", true, keys)
		f.waitPods("gate and Ready False", keys, 2*time.Minute, readyIs(v1.ConditionFalse))
		f.settle(3*time.Second, time.Minute)
	})
	r.DownLatency = f.flipLatencies(keys, from, v1.ConditionFalse)
	r.Up = f.measure(func() {
		from = time.Now()
		f.setFailing("ready", false, keys)
		f.waitPods("gate and Ready True", keys, 2*time.Minute, readyIs(v1.ConditionTrue))
		f.settle(3*time.Second, time.Minute)
	})
	r.UpLatency = f.flipLatencies(keys, from, v1.ConditionTrue)
	total := add(r.Down.delta, r.Up.delta)
	r.PerTransition = divide(total, r.Transitions)
	r.APIServerApplySeconds = applyLatency(total)
	f.t.Logf("transitions: %d (%d pods down and up): per transition %+v; gate latency down %+v up %+v",
		r.Transitions, r.Pods, r.PerTransition, r.DownLatency, r.UpLatency)
	return r
}

type killResult struct {
	Kills   int       `json:"kills"`
	Window  window    `json:"window"`
	PerKill perEvent  `json:"perKill"`
	ToKill  latencies `json:"secondsFromFailingToKill"`
}

// kills fails the liveness target of one pod on each of the first
// cfg.Kills nodes, heals it as soon as probed has stopped the container, and
// waits for the restarted container to be Ready again.
func (f *fleet) kills(cfg config) *killResult {
	nodes := f.nodes[:min(cfg.Kills, len(f.nodes))]
	keys := f.pick(cfg.Transitions, cfg.Transitions+1, len(nodes))
	r := &killResult{Kills: len(keys)}
	stops := make([]int, len(nodes))
	for i, n := range nodes {
		stops[i] = n.Runtime.Stops()
	}
	r.Window = f.measure(func() {
		from := time.Now()
		f.setFailing("live", true, keys)
		var ds []time.Duration
		done := make([]bool, len(nodes))
		deadline := time.Now().Add(3 * time.Minute)
		for len(ds) < len(nodes) {
			if time.Now().After(deadline) {
				f.t.Fatalf("liveness kills: %d of %d containers stopped within 3m", len(ds), len(nodes))
			}
			for i, n := range nodes {
				if !done[i] && n.Runtime.Stops() > stops[i] {
					done[i] = true
					ds = append(ds, time.Since(from))
					f.setFailing("live", false, keys[i:i+1])
				}
			}
			time.Sleep(100 * time.Millisecond)
		}
		r.ToKill = summarize(ds)
		f.waitPods("restarted and Ready", keys, 3*time.Minute, func(p *v1.Pod) bool {
			return len(p.Status.ContainerStatuses) == 1 && p.Status.ContainerStatuses[0].RestartCount >= 1 && readyIs(v1.ConditionTrue)(p)
		})
		f.settle(3*time.Second, time.Minute)
	})
	r.PerKill = divide(r.Window.delta, r.Kills)
	f.t.Logf("liveness kills: %d: per kill %+v", r.Kills, r.PerKill)
	return r
}

type stormResult struct {
	Pods                  int       `json:"pods"`
	Window                window    `json:"window"`
	Recover               window    `json:"recover"`
	Kills                 int       `json:"kills"`
	ProbedEventWritesPerS float64   `json:"probedEventWritesPerSecond"`
	ProbedStatusWritesPS  float64   `json:"probedStatusWritesPerSecond"`
	KubeletStatusWritesPS float64   `json:"kubeletStatusWritesPerSecond"`
	DownLatency           latencies `json:"gateLatencyDuringStormSeconds"`
	APIServerApplySeconds float64   `json:"apiserverApplySeconds"`
}

// storm fails every probe (readiness and liveness) of 10% of the pods for
// cfg.Storm; halfway, it flips cfg.Transitions other pods per node and
// measures how long their gate takes, to compare with the quiet figure.
func (f *fleet) storm(cfg config) *stormResult {
	m := cfg.Pods
	tenth := max(1, (m+9)/10)
	keys := f.pick(m-tenth, m, 0)
	probe := f.pick(0, min(cfg.Transitions, m-tenth), 0)
	r := &stormResult{Pods: len(keys)}
	stops := 0
	for _, n := range f.nodes {
		stops -= n.Runtime.Stops()
	}
	r.Window = f.measure(func() {
		start := time.Now()
		f.setFailing("ready", true, keys)
		f.setFailing("live", true, keys)
		time.Sleep(cfg.Storm / 2)
		from := time.Now()
		f.setFailing("ready", true, probe)
		f.waitPods("gate False during the storm", probe, 2*time.Minute, readyIs(v1.ConditionFalse))
		r.DownLatency = f.flipLatencies(probe, from, v1.ConditionFalse)
		f.setFailing("ready", false, probe)
		f.waitPods("gate True during the storm", probe, 2*time.Minute, readyIs(v1.ConditionTrue))
		time.Sleep(time.Until(start.Add(cfg.Storm)))
	})
	for _, n := range f.nodes {
		stops += n.Runtime.Stops()
	}
	r.Kills = stops
	d, secs := r.Window.delta, r.Window.Seconds
	r.ProbedEventWritesPerS = d.FS("probed", "event-write") / secs
	r.ProbedStatusWritesPS = d.FS("probed", "status-write") / secs
	r.KubeletStatusWritesPS = d.FS("kubelet", "status-write") / secs
	r.APIServerApplySeconds = applyLatency(d)
	r.Recover = f.measure(func() {
		f.setFailing("ready", false, keys)
		f.setFailing("live", false, keys)
		f.waitPods("every pod Ready after the storm", nil, 8*time.Minute, readyIs(v1.ConditionTrue))
		f.settle(5*time.Second, 2*time.Minute)
	})
	f.t.Logf("storm: %d pods failing for %v: %d kills, probed %.1f event writes/s, %.1f status writes/s; gate latency during storm %+v",
		r.Pods, cfg.Storm, r.Kills, r.ProbedEventWritesPerS, r.ProbedStatusWritesPS, r.DownLatency)
	return r
}

type restartResult struct {
	Nodes  int       `json:"nodes"`
	Window window    `json:"window"`
	Readyz latencies `json:"secondsToReadyz"` // start → /readyz 200
	Flips  int64     `json:"flips"`
	// Per restarted probed, from the flow-schema apiload.Counters.
	PodLists      float64 `json:"podListsPerRestart"`
	PodWatches    float64 `json:"podWatchesPerRestart"`
	StatusWrites  float64 `json:"statusWritesPerRestart"`
	EventWrites   float64 `json:"eventWritesPerRestart"`
	OtherRequests float64 `json:"otherRequestsPerRestart"`
}

// restartObservation is how long after the last restart flips are still
// looked for: two readiness periods, so every restarted worker has probed.
const restartObservation = 2 * readyPeriod * time.Second

// rollingRestart restarts every probed in turn, as a DaemonSet rollout with
// maxUnavailable 1 does: SIGTERM, start the new one, wait for /readyz.
func (f *fleet) rollingRestart(cfg config) *restartResult {
	r := &restartResult{Nodes: len(f.nodes)}
	flips0 := f.k.flips.Load()
	var ds []time.Duration
	r.Window = f.measure(func() {
		for _, n := range f.nodes {
			if err := n.Probed.Stop(30 * time.Second); err != nil {
				f.t.Fatal(err)
			}
			if _, err := n.Probed.Exited(); err != nil {
				f.t.Errorf("%s: probed exited with %v after SIGTERM", n.Name, err)
			}
			start := time.Now()
			if err := n.startProbed(cfg.ProbedFlags); err != nil {
				f.t.Fatal(err)
			}
			if err := n.Probed.waitReady(f.ctx, 2*time.Minute); err != nil {
				f.t.Fatal(err)
			}
			ds = append(ds, time.Since(start))
		}
		time.Sleep(restartObservation)
		f.settle(3*time.Second, time.Minute)
	})
	r.Flips = f.k.flips.Load() - flips0
	r.Window.Flips = r.Flips
	r.Readyz = summarize(ds)
	d, n := r.Window.delta, float64(len(f.nodes))
	r.PodLists = d.FS("probed", "pod-list") / n
	r.PodWatches = d.FS("probed", "pod-watch") / n
	r.StatusWrites = d.FS("probed", "status-write") / n
	r.EventWrites = d.FS("probed", "event-write") / n
	r.OtherRequests = d.FS("probed", "other") / n
	f.t.Logf("rolling restart of %d probed: %d flips, /readyz %+v, per restart %.1f lists %.1f watches %.1f status writes%s",
		r.Nodes, r.Flips, r.Readyz, r.PodLists, r.PodWatches, r.StatusWrites, d)
	return r
}

type apiserverResult struct {
	OutageSeconds float64 `json:"outageSeconds"`
	StartSeconds  float64 `json:"startSeconds"`
	// WatchesBackSeconds is from the new apiserver's /readyz until every
	// probed has opened its pod watch again.
	WatchesBackSeconds float64            `json:"watchesBackSeconds"`
	Flips              int64              `json:"flips"`
	Requests           map[string]float64 `json:"requestsSinceRestart"`
	APIServerCPUCores  float64            `json:"apiserverCPUCoresSinceStart"`
	ObservedSeconds    float64            `json:"observedSeconds"`
	PodListsPerNode    float64            `json:"probedPodListsPerNode"`
	PodWatchesPerNode  float64            `json:"probedPodWatchesPerNode"`
	StatusWritesTotal  float64            `json:"probedStatusWrites"`
}

// apiserverOutage is how long the apiserver stays down: long enough for
// every probed's watch to break and its client to back off.
const apiserverOutage = 5 * time.Second

// apiserverRestart stops the apiserver, starts it again, and measures how
// the N probed reconnect. The new apiserver's apiload.Counters start at zero, so
// they are the reconnection load.
func (f *fleet) apiserverRestart(cfg config) *apiserverResult {
	r := &apiserverResult{OutageSeconds: apiserverOutage.Seconds()}
	flips0 := f.k.flips.Load()
	if err := cp.StopAPIServer(); err != nil {
		f.t.Fatal(err)
	}
	time.Sleep(apiserverOutage)
	start := time.Now()
	if err := cp.StartAPIServer(f.ctx); err != nil {
		f.t.Fatal(err)
	}
	up := time.Now()
	r.StartSeconds = up.Sub(start).Seconds()
	deadline := up.Add(3 * time.Minute)
	for {
		c, err := apiload.Scrape(f.ctx, client)
		if err == nil && c.FS("probed", "pod-watch") >= float64(len(f.nodes)) {
			break
		}
		if time.Now().After(deadline) {
			f.t.Fatalf("probed pod watches not all back within 3m of the apiserver restart")
		}
		time.Sleep(250 * time.Millisecond)
	}
	r.WatchesBackSeconds = time.Since(up).Seconds()
	if err := f.parallelNodes(8, func(n *simNode) error { return n.Probed.waitReady(f.ctx, time.Minute) }); err != nil {
		f.t.Fatal(err)
	}
	time.Sleep(restartObservation)
	end := f.settle(3*time.Second, time.Minute)
	u := apiload.ReadUsage(cp.RunDir)
	r.ObservedSeconds = time.Since(up).Seconds()
	r.APIServerCPUCores = u.CPUSecs["kube-apiserver"] / time.Since(start).Seconds()
	r.Flips = f.k.flips.Load() - flips0
	r.Requests = end.NonZero()
	n := float64(len(f.nodes))
	r.PodListsPerNode = end.FS("probed", "pod-list") / n
	r.PodWatchesPerNode = end.FS("probed", "pod-watch") / n
	r.StatusWritesTotal = end.FS("probed", "status-write")
	f.t.Logf("apiserver restart: started in %.1fs, every probed watching again %.1fs later, %d flips; since restart:%s",
		r.StartSeconds, r.WatchesBackSeconds, r.Flips, end)
	return r
}
