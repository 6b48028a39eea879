package manager

import (
	"context"
	"fmt"
	"sort"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	"github.com/probed-dev/probed/pkg/hostpolicy"
	"github.com/probed-dev/probed/pkg/kill"
	"github.com/probed-dev/probed/pkg/podinformer"
	"github.com/probed-dev/probed/pkg/probespec"
	"github.com/probed-dev/probed/pkg/results"
	"github.com/probed-dev/probed/pkg/status"
	"github.com/probed-dev/probed/pkg/worker"
)

// StatusSink receives each pod's desired probe status. pkg/status's Writer is one.
type StatusSink = status.Sink

// Options configures a Manager. Informer, Prober and Status are required.
type Options struct {
	// Informer watches this node's pods. The Manager adds its event
	// handlers; it must not have started yet.
	Informer cache.SharedIndexInformer
	// Pods looks the informer's pods up by UID; nil adds the index to
	// Informer (podinformer.NewByUID). The workers read pods through it.
	Pods   *podinformer.ByUID
	Source probespec.ProbeSource
	Prober worker.Prober
	// Killer acts on liveness and startup failures (package kill's chain);
	// nil takes no action (dry run).
	Killer kill.Killer
	// HostGuard applies --probe-host-policy to the IP literals probes name
	// as hosts, at sync time, as validation problems; nil checks nothing.
	// The prober applies the same guard when it dials.
	HostGuard *hostpolicy.Guard
	// SandboxIPs says which IPs the node's runtime gave a pod's sandbox
	// (cri.Limited over cri.Verified): the only pod IPs the host policy
	// takes as the pod's own. Nil where no runtime can say
	// (--runtime-type=none): then none are, unless TrustPodStatusIPs.
	SandboxIPs worker.SandboxIPSource
	// PodNetworks opens pods' network namespaces for probes sent from
	// inside the pod (--pod-network-probes); nil: such probes are refused
	// with InvalidProbe.
	PodNetworks *worker.PodNetworks
	// TrustPodStatusIPs takes status.podIPs as the pod's own IPs without
	// asking the runtime (--trust-pod-status-ips): for test setups whose
	// pods have no sandbox. Whoever may write pods/status then chooses
	// what the host policy lets probes reach.
	TrustPodStatusIPs bool
	// Liveness, if set, hears liveness successes and pods leaving (the
	// restart guard's workload tracker).
	Liveness worker.LivenessTracker
	// Recorder emits events; nil emits none (dry run).
	Recorder worker.Recorder
	Status   StatusSink
	// Seeds reads back, from a pod as the API server has it, what probed
	// had established before it restarted (status.SeedsFor the status
	// mode); nil is status.Seeds, probed's own conditions.
	Seeds func(*v1.Pod) map[string]status.Seed
	// RequireReadinessGate warns about pods whose probed readiness or
	// startup probes lack the probed.io/ready readiness gate (conditions
	// mode).
	RequireReadinessGate bool
	// WorkerMetrics are the workers'; Metrics the manager's own. Both may be nil.
	WorkerMetrics *worker.Metrics
	Metrics       *Metrics
	Clock         clock.WithTicker
	// DaemonStart spreads the first probes after a restart of probed.
	DaemonStart time.Time
	// GCPeriod is how often workers of pods gone from the cache are swept.
	GCPeriod time.Duration

	// RequireApprovedReach refuses probes that run something or connect
	// beyond the pod's own IP on pods without probed.io/approved-reach
	// (--require-approved-reach), for clusters without the admission
	// policy that guards such pods.
	RequireApprovedReach bool
	// ReachPolicy says whether the probe-reach admission policy is in
	// force; while it is not (or nil), probes are held to the reach
	// probed recorded when it first saw their pod (holdReach). Run waits
	// until it is Known.
	ReachPolicy ReachPolicy
	// ReachRecorder keeps those records in the pods' status; nil keeps
	// them in memory only (dry run).
	ReachRecorder ReachRecorder

	// ResultChangeEvents makes workers emit a Normal ProbeResultChanged
	// event when a probe's decided result flips (--probe-result-change-events).
	ResultChangeEvents bool
}

// Manager is the only owner of the worker map: one worker per (pod UID,
// container, probe type) declared on this node's pods. It starts workers when
// pods appear, restarts only the workers whose probe changed when the
// annotation is edited, and stops them when pods go.
type Manager struct {
	opts Options
	// ownIPs is shared by every worker and sync's host policy checks.
	ownIPs  *worker.OwnIPs
	indexer cache.Indexer
	queue   workqueue.TypedRateLimitingInterface[string]

	liveness, readiness, startup results.Manager

	// feed derives each pod's status from the results caches and the
	// probe sets pushed to it (pushProbesLocked); results reach the
	// writer through it, not through the manager.
	feed *status.Feed

	mu   sync.Mutex
	pods map[types.UID]*podEntry
	// byKey maps namespace/name to the UIDs tracked under it (normally one).
	byKey map[string]map[types.UID]struct{}
	// unapproved counts the probes refused for their reach, on every pod.
	unapproved int
	// held is the reach recorded of every pod of the node, probes or
	// not, by namespace/name (holdReach).
	held map[string]*heldReach
}

type probeKey struct {
	container string
	probeType probespec.ProbeType
}

type podEntry struct {
	key status.PodKey
	// started is the pod's "started" rule, which its workers read; it is
	// told of every change to the startup probes (publishStartedLocked).
	started *worker.PodStarted
	workers map[probeKey]*worker.Worker
	specs   map[probeKey]probespec.DeclaredProbe
	// ungated: the pod's readiness or startup probes lack the probed.io/ready
	// gate; gateWarned: the Warning was raised.
	ungated, gateWarned bool
	// ended holds the probes whose worker ended on its own; they are not
	// started again unless the probe changes or the container runs again
	// (endedOn: the container instance each ended on).
	ended    map[probeKey]probespec.DeclaredProbe
	endedOn  map[probeKey]string
	order    []string // containers with any probe, in pod spec order
	invalid  map[probeKey]string
	problems string // the problem set last reported, so events are not repeated
	seeds    map[string]status.Seed
	// unapproved is how many of its probes are refused for their reach.
	unapproved int
	// parity holds the reasons of the pod's parity warnings (parity.go);
	// parityWarned the "<container>/<reason>" already raised.
	parity       map[string]bool
	parityWarned map[string]bool
}

// New wires a Manager to its informer. Call Run to start it.
func New(o Options) (*Manager, error) {
	if o.Informer == nil || o.Prober == nil || o.Status == nil {
		return nil, fmt.Errorf("manager: Informer, Prober and Status are required")
	}
	if o.Clock == nil {
		o.Clock = clock.RealClock{}
	}
	if o.DaemonStart.IsZero() {
		o.DaemonStart = o.Clock.Now()
	}
	if o.GCPeriod <= 0 {
		o.GCPeriod = time.Minute
	}
	if o.Source == "" {
		o.Source = probespec.ProbeSourceAnnotation
	}
	if o.Seeds == nil {
		o.Seeds = status.Seeds
	}
	if o.Pods == nil {
		pods, err := podinformer.NewByUID(o.Informer)
		if err != nil {
			return nil, fmt.Errorf("manager: %w", err)
		}
		o.Pods = pods
	}
	m := &Manager{
		opts:    o,
		ownIPs:  &worker.OwnIPs{Guard: o.HostGuard, Sandbox: o.SandboxIPs, TrustStatus: o.TrustPodStatusIPs},
		indexer: o.Informer.GetIndexer(),
		queue: workqueue.NewTypedRateLimitingQueueWithConfig(
			workqueue.DefaultTypedControllerRateLimiter[string](),
			workqueue.TypedRateLimitingQueueConfig[string]{Name: "probed_pods"}),
		// Nothing consumes liveness results as updates: the worker kills on
		// its own. A cache reports nothing, so nothing piles up per instance.
		liveness:  results.NewCache(),
		readiness: results.NewManager(),
		startup:   results.NewManager(),
		pods:      map[types.UID]*podEntry{},
		byKey:     map[string]map[types.UID]struct{}{},
		held:      map[string]*heldReach{},
	}
	m.feed = status.NewFeed(status.FeedOptions{
		Pods: o.Pods, Readiness: m.readiness, Startup: m.startup, Sink: o.Status,
		// Not on the readiness path: a startup success runs the readiness probe at once.
		OnStartupSuccess: m.triggerReadiness,
	})
	_, err := o.Informer.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    m.enqueue,
		UpdateFunc: func(_, obj any) { m.enqueue(obj) },
		DeleteFunc: m.enqueue,
	})
	if err != nil {
		return nil, fmt.Errorf("manager: adding event handlers: %w", err)
	}
	return m, nil
}

func (m *Manager) enqueue(obj any) {
	key, err := cache.DeletionHandlingMetaNamespaceKeyFunc(obj)
	if err != nil {
		utilruntime.HandleError(err)
		return
	}
	m.queue.Add(key)
}

// Run syncs pods until ctx is done, then stops every worker and waits for
// them to exit. It expects the informer to be running.
func (m *Manager) Run(ctx context.Context) {
	defer utilruntime.HandleCrash()
	go func() {
		<-ctx.Done()
		m.queue.ShutDown()
	}()
	synced := []cache.InformerSynced{m.opts.Informer.HasSynced}
	if m.opts.ReachPolicy != nil {
		// Judged before the first pod, so a restart of probed does not
		// refuse a probe for a moment that the policy admitted.
		synced = append(synced, m.opts.ReachPolicy.Known)
	}
	if !cache.WaitForCacheSync(ctx.Done(), synced...) {
		m.stopAll()
		return
	}
	var wg sync.WaitGroup
	wg.Add(2)
	go func() { defer wg.Done(); m.feed.Run(ctx) }()
	go func() { defer wg.Done(); m.gcLoop(ctx) }()
	for m.processNext(ctx) {
	}
	wg.Wait()
	m.stopAll()
}

func (m *Manager) processNext(ctx context.Context) bool {
	key, quit := m.queue.Get()
	if quit {
		return false
	}
	defer m.queue.Done(key)
	if err := m.sync(ctx, key); err != nil {
		klog.ErrorS(err, "Syncing pod probes", "pod", key)
		m.queue.AddRateLimited(key)
		return true
	}
	m.queue.Forget(key)
	return true
}

// stopAll stops every worker and waits for them, so none outlives Run.
func (m *Manager) stopAll() {
	m.mu.Lock()
	var all []*worker.Worker
	for _, e := range m.pods {
		for _, w := range e.workers {
			w.Stop()
			all = append(all, w)
		}
	}
	m.mu.Unlock()
	for _, w := range all {
		<-w.Done()
	}
}

// Snapshots describes every worker, for /debug/probes.
func (m *Manager) Snapshots() []worker.Snapshot {
	m.mu.Lock()
	var out []worker.Snapshot
	for _, e := range m.pods {
		for _, w := range e.workers {
			out = append(out, w.Snapshot())
		}
	}
	m.mu.Unlock()
	sort.Slice(out, func(i, j int) bool {
		a, b := out[i], out[j]
		if a.PodNamespace != b.PodNamespace {
			return a.PodNamespace < b.PodNamespace
		}
		if a.PodName != b.PodName {
			return a.PodName < b.PodName
		}
		if a.Container != b.Container {
			return a.Container < b.Container
		}
		return a.ProbeType < b.ProbeType
	})
	return out
}

// WorkerCount is the number of live workers.
func (m *Manager) WorkerCount() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	n := 0
	for _, e := range m.pods {
		n += len(e.workers)
	}
	return n
}

func (m *Manager) resultsFor(t probespec.ProbeType) results.Manager {
	switch t {
	case probespec.Liveness:
		return m.liveness
	case probespec.Readiness:
		return m.readiness
	}
	return m.startup
}
