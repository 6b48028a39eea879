package manager

import (
	"context"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"

	"github.com/probed-dev/probed/pkg/containerstatus"
	"github.com/probed-dev/probed/pkg/probespec"
	"github.com/probed-dev/probed/pkg/results"
	"github.com/probed-dev/probed/pkg/status"
	"github.com/probed-dev/probed/pkg/worker"
)

// sync makes the workers of the pod at key match what the pod declares.
func (m *Manager) sync(ctx context.Context, key string) error {
	obj, exists, err := m.indexer.GetByKey(key)
	if err != nil {
		return err
	}
	var pod *v1.Pod
	if exists {
		pod, _ = obj.(*v1.Pod)
	}
	// Pods gone, or replaced by a new pod of the same name, lose their workers.
	m.mu.Lock()
	for uid := range m.byKey[key] {
		if pod == nil || pod.UID != uid {
			m.removePodLocked(uid)
		}
	}
	var uid types.UID
	if pod != nil {
		uid = pod.UID
	}
	m.forgetHeldLocked(key, uid)
	m.mu.Unlock()
	if pod == nil {
		return nil
	}
	if pod.Status.Phase == v1.PodSucceeded || pod.Status.Phase == v1.PodFailed {
		m.mu.Lock()
		m.removePodLocked(pod.UID)
		m.forgetHeldLocked(key, "")
		m.mu.Unlock()
		return nil
	}

	all, problems := probespec.DeclaredProbes(pod, m.opts.Source)
	declared, problems, unapproved := m.checkReach(pod, all, problems)
	declared, problems, held := m.holdReach(key, pod, all, declared, problems)
	unapproved += held
	declared, problems = podNetworkProblems(m.opts.PodNetworks != nil, declared, problems)
	declared, problems = hostPolicyProblems(m.opts.HostGuard, pod, m.ownIPs.SyncIPs(pod), declared, problems)
	m.mu.Lock()
	e := m.pods[pod.UID]
	if e == nil {
		if len(declared) == 0 && len(problems) == 0 {
			m.mu.Unlock()
			return nil
		}
		e = &podEntry{
			key:     status.PodKey{Namespace: pod.Namespace, Name: pod.Name, UID: pod.UID},
			workers: map[probeKey]*worker.Worker{},
			specs:   map[probeKey]probespec.DeclaredProbe{},
			ended:   map[probeKey]probespec.DeclaredProbe{},
			// Read once, when probed first sees the pod: the results it had
			// before a restart of probed.
			seeds:   m.opts.Seeds(pod),
			started: worker.NewPodStarted(m.startup, m.opts.Source == probespec.ProbeSourceAnnotation),
		}
		m.pods[pod.UID] = e
		if m.byKey[key] == nil {
			m.byKey[key] = map[types.UID]struct{}{}
		}
		m.byKey[key][pod.UID] = struct{}{}
	}
	m.setUnapprovedLocked(e, unapproved)
	newProblems := m.recordProblemsLocked(e, problems)
	m.reconcileWorkersLocked(ctx, pod, e, declared)
	warnGate, gating := m.checkGateLocked(pod, e, declared)
	m.countUngatedLocked()
	parity := m.checkParityLocked(pod, e, declared)
	m.countParityLocked()
	m.pushProbesLocked(e)
	m.mu.Unlock()

	if newProblems {
		m.reportProblems(pod, problems)
	}
	if warnGate {
		m.reportMissingGate(pod, gating)
	}
	m.reportParity(pod, parity)
	m.feed.Update(pod.UID)
	m.triggerNotReady(pod)
	return nil
}

// triggerNotReady is the kubelet's readiness trigger (UpdatePodStatus, on
// every pod sync): a started, running container whose readiness result for
// this instance is not a Success a probe decided gets its readiness probe
// run now, so that a new or restarted container does not wait for its
// worker's next tick. A seed is no such result: the kubelet, too, has no
// result for a container after its own restart, keeps it Ready (KEP-4781)
// and triggers its probe, so a seeded container stays Ready and is probed
// at once.
func (m *Manager) triggerNotReady(pod *v1.Pod) {
	type candidate struct {
		w  *worker.Worker
		cs *v1.ContainerStatus
	}
	var cands []candidate
	var started *worker.PodStarted
	m.mu.Lock()
	if e := m.pods[pod.UID]; e != nil {
		started = e.started
		for _, cs := range allStatuses(pod) {
			if cs.State.Running == nil || cs.ContainerID == "" {
				continue
			}
			if w := e.workers[probeKey{cs.Name, probespec.Readiness}]; w != nil {
				cands = append(cands, candidate{w, &cs})
			}
		}
	}
	m.mu.Unlock()
	for _, c := range cands {
		if v, ok := m.readiness.Get(c.cs.ContainerID); ok && v.Result == results.Success && !v.Seeded {
			continue
		}
		if !started.Started(pod, c.cs) {
			continue
		}
		c.w.Trigger()
	}
}

// reconcileWorkersLocked starts, keeps or replaces workers. An unchanged probe
// keeps its worker and its state; a changed one gets a fresh worker.
func (m *Manager) reconcileWorkersLocked(ctx context.Context, pod *v1.Pod, e *podEntry, declared []probespec.DeclaredProbe) {
	var launch []func()
	want := make(map[probeKey]probespec.DeclaredProbe, len(declared))
	e.order = e.order[:0]
	seen := map[string]bool{}
	for _, d := range declared {
		k := probeKey{d.Container.Name, d.Type}
		want[k] = d
		if !seen[d.Container.Name] {
			seen[d.Container.Name] = true
			e.order = append(e.order, d.Container.Name)
		}
	}
	for k := range e.invalid {
		if !seen[k.container] {
			seen[k.container] = true
			e.order = append(e.order, k.container)
		}
	}
	dropUndeclaredSeedsLocked(e, want)
	for k, w := range e.workers {
		d, ok := want[k]
		if ok && probespec.ProbeSpecEqual(d.Probe, e.specs[k].Probe) && probespec.SameExtensions(d, e.specs[k]) {
			continue
		}
		if ok {
			m.carrySuccessLocked(pod, e, k)
		}
		w.Stop()
		delete(e.workers, k)
		delete(e.specs, k)
		if ok {
			klog.InfoS("Probe changed; restarting its worker", "pod", klog.KObj(pod), "container", k.container, "probeType", k.probeType)
		} else if k.probeType == probespec.Liveness && m.opts.Liveness != nil {
			m.opts.Liveness.LivenessPassed(pod.UID, k.container)
		}
		// The replacement starts once the old worker has cleaned up, so its
		// results are never removed from under the new one.
		if ok {
			launch = append(launch, m.addWorkerLocked(ctx, pod, e, d, w.Done()))
		}
	}
	for k, d := range want {
		if _, ok := e.workers[k]; ok {
			continue
		}
		// A worker that ended on its own (its container will not run again,
		// or the pod is being deleted) stays ended until its probe is edited
		// or its container runs again after all (every container restarted
		// for another's RestartAllContainers rule, say): the kubelet adds the
		// pod's missing workers on every sync of a pod that is not
		// terminating, and a new one ends at once on a container that stays
		// terminated.
		if ended, ok := e.ended[k]; ok && probespec.ProbeSpecEqual(d.Probe, ended.Probe) && probespec.SameExtensions(d, ended) &&
			!runsAgain(pod, k.container, e.endedOn[k]) {
			continue
		}
		delete(e.ended, k)
		delete(e.endedOn, k)
		launch = append(launch, m.addWorkerLocked(ctx, pod, e, d, nil))
	}
	for k := range e.ended {
		if _, ok := want[k]; !ok {
			delete(e.ended, k)
			delete(e.endedOn, k)
		}
	}
	// Only now do the new workers run: a readiness worker must not probe
	// before the startup worker beside it, added later in this map's
	// order, gates it.
	publishStartedLocked(e)
	for _, run := range launch {
		run()
	}
}

// publishStartedLocked tells the pod's started rule, which its workers
// read, what the manager now knows of the pod's startup probes.
func publishStartedLocked(e *podEntry) {
	probes := map[string]worker.StartupProbe{}
	note := func(k probeKey, f func(*worker.StartupProbe)) {
		if k.probeType == probespec.Startup {
			p := probes[k.container]
			f(&p)
			probes[k.container] = p
		}
	}
	for k := range e.workers {
		note(k, func(p *worker.StartupProbe) { p.Live = true })
	}
	for k := range e.invalid {
		note(k, func(p *worker.StartupProbe) { p.Invalid = true })
	}
	for k := range e.ended {
		note(k, func(p *worker.StartupProbe) { p.Ended = true })
	}
	e.started.Set(probes)
}

// runsAgain reports whether the named container of a pod that is not
// terminating has an instance other than the one its worker ended on.
func runsAgain(pod *v1.Pod, name, endedOn string) bool {
	if pod.DeletionTimestamp != nil {
		return false
	}
	cs := containerstatus.Find(pod, name)
	return cs != nil && cs.ContainerID != "" && cs.ContainerID != endedOn
}

// addWorkerLocked registers the worker for d and returns what runs it,
// which the caller calls once the pod's started rule knows every worker.
func (m *Manager) addWorkerLocked(ctx context.Context, pod *v1.Pod, e *podEntry, d probespec.DeclaredProbe, after <-chan struct{}) (run func()) {
	k := probeKey{d.Container.Name, d.Type}
	uid := pod.UID
	var w *worker.Worker
	w = worker.New(worker.Config{
		PodUID:        uid,
		PodNamespace:  pod.Namespace,
		PodName:       pod.Name,
		StaticPodUID:  worker.StaticPodUID(pod),
		Container:     &d.Container,
		ProbeType:     d.Type,
		Spec:          d.Probe,
		Prober:        m.opts.Prober,
		Pods:          m.opts.Pods,
		OwnIPs:        m.ownIPs,
		Liveness:      m.opts.Liveness,
		Results:       m.resultsFor(d.Type),
		Recorder:      m.opts.Recorder,
		Killer:        m.opts.Killer,
		Started:       e.started.Started,
		InitialResult: seedFor(e.seeds[d.Container.Name], d.Type),
		Clock:         m.opts.Clock,
		DaemonStart:   m.opts.DaemonStart,
		Metrics:       m.opts.WorkerMetrics,
		OnExit:        func() { m.workerExited(ctx, uid, k, w) },
		KeepAlive:     d.KeepAlive,
		HTTPCheck:     d.HTTPCheck,
		TLS:           d.TLS,
		Period:        d.Period,
		Timeout:       d.Timeout,
		FromPod:       d.FromPod,
		PodNetworks:   m.opts.PodNetworks,

		ResultChangeEvents: m.opts.ResultChangeEvents,
	})
	e.workers[k] = w
	e.specs[k] = d
	return func() {
		go func() {
			if after != nil {
				select {
				case <-after:
				case <-ctx.Done():
				}
			}
			w.Run(ctx)
		}()
	}
}

// carrySuccessLocked keeps the Success of a readiness or startup worker about
// to be replaced (its probe was edited) as a seed for the same container
// instance, as a restart of probed does: the condition stays True until the
// new probe's own results say otherwise, instead of flipping to pending
// between the old worker's exit and the new one's first result.
//
// A seed holds only while nothing newer is known for that instance: when
// the worker being replaced knows another result (the container failed
// since an earlier edit, or since the seed read back after a restart of
// probed), the seed of that type is dropped, so the new worker starts from
// the kubelet's initial value and never brings a stale Ready back.
func (m *Manager) carrySuccessLocked(pod *v1.Pod, e *podEntry, k probeKey) {
	if k.probeType != probespec.Readiness && k.probeType != probespec.Startup {
		return
	}
	cs := containerstatus.Find(pod, k.container)
	if cs == nil || cs.ContainerID == "" {
		return
	}
	v, known := m.resultsFor(k.probeType).Get(cs.ContainerID)
	if !known {
		return
	}
	s := e.seeds[k.container]
	if s.ContainerID != cs.ContainerID {
		s = status.Seed{ContainerID: cs.ContainerID}
	}
	var carried *bool
	if v.Result == results.Success {
		yes := true
		carried = &yes
	}
	storeSeedLocked(e, k, s, carried)
}

// dropUndeclaredSeedsLocked forgets the seeds of probes that left the
// declared set (removed, made invalid, refused for their reach or by the
// host policy): their workers stop without a carry, and a seed belongs to
// the worker it was handed to. When the probe comes back, its new worker
// starts from the kubelet's initial value: what the seed said may since
// have been overtaken by a failure that went with the old worker.
func dropUndeclaredSeedsLocked(e *podEntry, want map[probeKey]probespec.DeclaredProbe) {
	for name := range e.seeds {
		if _, ok := want[probeKey{name, probespec.Readiness}]; !ok {
			clearSeedLocked(e, probeKey{name, probespec.Readiness})
		}
		if _, ok := want[probeKey{name, probespec.Startup}]; !ok {
			clearSeedLocked(e, probeKey{name, probespec.Startup})
		}
	}
}

// clearSeedLocked forgets the seed of one probe.
func clearSeedLocked(e *podEntry, k probeKey) {
	if s, ok := e.seeds[k.container]; ok {
		storeSeedLocked(e, k, s, nil)
	}
}

// storeSeedLocked stores s, with the value of k's probe type set to v, as
// the seed of k's container; a seed left with no value is deleted.
func storeSeedLocked(e *podEntry, k probeKey, s status.Seed, v *bool) {
	switch k.probeType {
	case probespec.Readiness:
		s.Ready = v
	case probespec.Startup:
		s.Started = v
	}
	if s.Ready == nil && s.Started == nil {
		delete(e.seeds, k.container)
		return
	}
	if e.seeds == nil {
		e.seeds = map[string]status.Seed{}
	}
	e.seeds[k.container] = s
}

// seedFor turns a restart-safety seed into a worker's InitialResult.
func seedFor(s status.Seed, t probespec.ProbeType) func(string) (results.Result, bool) {
	var v *bool
	switch t {
	case probespec.Readiness:
		v = s.Ready
	case probespec.Startup:
		v = s.Started
	}
	if !status.Seeded(s.ContainerID, v) {
		return nil
	}
	id := s.ContainerID
	return func(containerID string) (results.Result, bool) { return status.SeedResult(id, containerID) }
}

// workerExited drops a worker that ended on its own (pod finished, container
// will not restart) from the map, unless it was already replaced.
func (m *Manager) workerExited(ctx context.Context, uid types.UID, k probeKey, w *worker.Worker) {
	m.mu.Lock()
	if e := m.pods[uid]; e != nil && e.workers[k] == w {
		delete(e.workers, k)
		// Ended without a carry: its seed went with it.
		clearSeedLocked(e, k)
		if d, ok := e.specs[k]; ok {
			e.ended[k] = d
			if e.endedOn == nil {
				e.endedOn = map[probeKey]string{}
			}
			e.endedOn[k] = w.Snapshot().ContainerID
		}
		delete(e.specs, k)
		publishStartedLocked(e)
		m.pushProbesLocked(e)
	}
	m.mu.Unlock()
	if ctx.Err() != nil {
		// Shutting down: the writer flushes what the workers last decided.
		// A status without the stopped probe would drop its conditions and
		// turn probed.io/ready True (NoGatingProbes) on the way out.
		return
	}
	m.feed.Update(uid)
}

// removePodLocked stops a pod's workers and forgets its status.
func (m *Manager) removePodLocked(uid types.UID) {
	e := m.pods[uid]
	if e == nil {
		return
	}
	for _, w := range e.workers {
		w.Stop()
	}
	e.started.Forget()
	delete(m.pods, uid)
	if e.ungated {
		m.countUngatedLocked()
	}
	m.setUnapprovedLocked(e, 0)
	if len(e.parity) > 0 {
		m.countParityLocked()
	}
	key := e.key.Namespace + "/" + e.key.Name
	delete(m.byKey[key], uid)
	if len(m.byKey[key]) == 0 {
		delete(m.byKey, key)
	}
	m.feed.Forget(uid)
	if m.opts.Liveness != nil {
		m.opts.Liveness.ForgetPod(uid)
	}
	klog.V(2).InfoS("Stopped probing pod", "pod", klog.KRef(e.key.Namespace, e.key.Name), "podUID", uid)
}

// gcLoop sweeps workers of pods that left the cache without a delete event
// reaching us (a relist that missed the deletion).
func (m *Manager) gcLoop(ctx context.Context) {
	t := m.opts.Clock.NewTicker(m.opts.GCPeriod)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C():
			m.gc()
		}
	}
}

func (m *Manager) gc() {
	m.mu.Lock()
	var keys []string
	for key := range m.byKey {
		keys = append(keys, key)
	}
	for key := range m.held {
		if _, tracked := m.byKey[key]; !tracked {
			keys = append(keys, key)
		}
	}
	m.mu.Unlock()
	for _, key := range keys {
		if _, exists, _ := m.indexer.GetByKey(key); !exists {
			m.queue.Add(key)
		}
	}
}
