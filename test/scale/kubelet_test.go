//go:build scale

package scale

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/strategicpatch"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	listers "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"
)

const (
	gate      = "probed.io/ready"
	readyCond = "ready.probed.io/app"
	podLabel  = "probed.io/scale"
)

// kubelet plays the kubelet of every simulated node, for pod status only:
//   - when a pod's readiness gate (or a container's readiness) no longer
//     matches its Ready/ContainersReady conditions it patches pods/status
//     with the recomputed pair, as the kubelet's status manager does after
//     its pod config source delivers the changed pod (Ready is True only when
//     every container is ready and every readiness gate condition is True;
//     lastTransitionTime moves only when the status moves);
//   - when the runtime reports a container stopped (a liveness kill) it
//     writes the exit, then the restarted container, with the kubelet's
//     crash-loop back-off between restarts.
//
// It writes as system:node:<node>, through the Node authorizer and
// NodeRestriction, so its writes are counted apart from probed's. It also
// counts every condition transition it sees, which is how a rolling restart
// of probed is checked for flips.
type kubelet struct {
	informer cache.SharedIndexInformer
	lister   listers.PodLister
	nodes    map[string]kubernetes.Interface // node name → its kubelet client
	queue    workqueue.TypedRateLimitingInterface[string]

	flips atomic.Int64 // status changes of Ready or any probed condition
	// writeErrors counts failed status writes; the result reports them.
	writeErrors atomic.Int64

	// restartDelay, if set, replaces the crash-loop back-off before the
	// n-th restart (n from 0); onKill, if set, hears every kill as the
	// runtime takes it: the pod and its restarts so far. Both are set
	// before run.
	restartDelay func(n int) time.Duration
	onKill       func(key string, restarts int)

	mu         sync.Mutex
	seen       map[string]time.Time // "<ns>/<pod> <type>=<status>" → first seen
	containers map[string]string    // runtime container ID → "<ns>/<pod>"
	restarts   map[string]int       // "<ns>/<pod>" → restarts so far
}

func newKubelet(admin kubernetes.Interface) *kubelet {
	f := informers.NewSharedInformerFactoryWithOptions(admin, 0,
		informers.WithTweakListOptions(func(o *metav1.ListOptions) { o.LabelSelector = podLabel }))
	inf := f.Core().V1().Pods()
	k := &kubelet{
		informer:   inf.Informer(),
		lister:     inf.Lister(),
		nodes:      map[string]kubernetes.Interface{},
		queue:      workqueue.NewTypedRateLimitingQueue(workqueue.DefaultTypedControllerRateLimiter[string]()),
		seen:       map[string]time.Time{},
		containers: map[string]string{},
		restarts:   map[string]int{},
	}
	_, _ = k.informer.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: func(obj any) { k.observe(nil, obj.(*v1.Pod)) },
		UpdateFunc: func(old, obj any) {
			k.observe(old.(*v1.Pod), obj.(*v1.Pod))
		},
	})
	return k
}

// run starts the informer and the status workers; they stop with ctx.
func (k *kubelet) run(ctx context.Context, workers int) error {
	go k.informer.Run(ctx.Done())
	if !cache.WaitForCacheSync(ctx.Done(), k.informer.HasSynced) {
		return fmt.Errorf("stand-in kubelet: pod informer did not sync")
	}
	for range workers {
		go func() {
			for k.processNext(ctx) {
			}
		}()
	}
	go func() { <-ctx.Done(); k.queue.ShutDown() }()
	return nil
}

var watched = []string{gate, readyCond, string(v1.PodReady)}

// observe records condition transitions and queues pods whose Ready is stale.
func (k *kubelet) observe(old, pod *v1.Pod) {
	key := pod.Namespace + "/" + pod.Name
	now := time.Now()
	k.mu.Lock()
	for _, t := range watched {
		c := condition(pod, t)
		if c == nil {
			continue
		}
		if old != nil {
			if o := condition(old, t); o != nil && o.Status != c.Status {
				k.flips.Add(1)
			}
		}
		sk := key + " " + t + "=" + string(c.Status)
		if _, ok := k.seen[sk]; !ok || (old != nil && condStatus(old, t) != c.Status) {
			k.seen[sk] = now
		}
	}
	k.mu.Unlock()
	if pod.Status.Phase == v1.PodRunning && readyStale(pod) {
		k.queue.Add(key)
	}
}

// seenAt is when the stand-in last saw condition t of pod key become status s.
func (k *kubelet) seenAt(key, t string, s v1.ConditionStatus) (time.Time, bool) {
	k.mu.Lock()
	defer k.mu.Unlock()
	at, ok := k.seen[key+" "+t+"="+string(s)]
	return at, ok
}

func (k *kubelet) processNext(ctx context.Context) bool {
	key, quit := k.queue.Get()
	if quit {
		return false
	}
	defer k.queue.Done(key)
	ns, name, _ := cache.SplitMetaNamespaceKey(key)
	pod, err := k.lister.Pods(ns).Get(name)
	if err != nil || !readyStale(pod) {
		k.queue.Forget(key)
		return true
	}
	if err := k.patchStatus(ctx, pod, func(p *v1.Pod) { setReadyConditions(p, time.Now()) }); err != nil {
		k.writeErrors.Add(1)
		k.queue.AddRateLimited(key)
		return true
	}
	k.queue.Forget(key)
	return true
}

// patchStatus sends the difference mutate makes as a strategic merge patch
// on pods/status, as the kubelet's status manager does, with the pod's UID
// as a precondition.
func (k *kubelet) patchStatus(ctx context.Context, pod *v1.Pod, mutate func(*v1.Pod)) error {
	c := k.nodes[pod.Spec.NodeName]
	if c == nil {
		return fmt.Errorf("pod %s/%s on unknown node %q", pod.Namespace, pod.Name, pod.Spec.NodeName)
	}
	updated := pod.DeepCopy()
	mutate(updated)
	oldJSON, err := json.Marshal(v1.Pod{Status: pod.Status})
	if err != nil {
		return err
	}
	newJSON, err := json.Marshal(v1.Pod{ObjectMeta: metav1.ObjectMeta{UID: pod.UID}, Status: updated.Status})
	if err != nil {
		return err
	}
	patch, err := strategicpatch.CreateTwoWayMergePatch(oldJSON, newJSON, v1.Pod{})
	if err != nil {
		return err
	}
	rctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	_, err = c.CoreV1().Pods(pod.Namespace).Patch(rctx, pod.Name, types.StrategicMergePatchType, patch, metav1.PatchOptions{}, "status")
	return err
}

// containersReady and podReady are the kubelet's rules for the two
// conditions it owns: every container ready; that, and every gate True.
func containersReady(p *v1.Pod) (bool, string) {
	var unready []string
	for _, cs := range p.Status.ContainerStatuses {
		if !cs.Ready {
			unready = append(unready, cs.Name)
		}
	}
	if len(unready) > 0 || len(p.Status.ContainerStatuses) == 0 {
		return false, fmt.Sprintf("containers with unready status: %v", unready)
	}
	return true, ""
}

func podReady(p *v1.Pod) (bool, string, string) {
	if ok, msg := containersReady(p); !ok {
		return false, "ContainersNotReady", msg
	}
	for _, g := range p.Spec.ReadinessGates {
		c := condition(p, string(g.ConditionType))
		if c == nil {
			return false, "ReadinessGatesNotReady", fmt.Sprintf("corresponding condition of pod readiness gate %q does not exist.", g.ConditionType)
		}
		if c.Status != v1.ConditionTrue {
			return false, "ReadinessGatesNotReady", fmt.Sprintf("the status of pod readiness gate %q is not \"True\", but %s", g.ConditionType, c.Status)
		}
	}
	return true, "", ""
}

// readyStale reports whether Ready or ContainersReady differ from the rules.
func readyStale(p *v1.Pod) bool {
	cr, _ := containersReady(p)
	r, reason, _ := podReady(p)
	c1, c2 := condition(p, string(v1.ContainersReady)), condition(p, string(v1.PodReady))
	return c1 == nil || c2 == nil || (c1.Status == v1.ConditionTrue) != cr || (c2.Status == v1.ConditionTrue) != r || c2.Reason != reason
}

func setReadyConditions(p *v1.Pod, now time.Time) {
	cr, crMsg := containersReady(p)
	crReason := ""
	if !cr {
		crReason = "ContainersNotReady"
	}
	r, reason, msg := podReady(p)
	setCondition(p, v1.ContainersReady, cr, crReason, crMsg, now)
	setCondition(p, v1.PodReady, r, reason, msg, now)
}

func setCondition(p *v1.Pod, t v1.PodConditionType, ok bool, reason, msg string, now time.Time) {
	s := v1.ConditionFalse
	if ok {
		s = v1.ConditionTrue
	}
	for i := range p.Status.Conditions {
		c := &p.Status.Conditions[i]
		if c.Type == t {
			if c.Status != s {
				c.LastTransitionTime = metav1.NewTime(now.Truncate(time.Second))
			}
			c.Status, c.Reason, c.Message = s, reason, msg
			return
		}
	}
	p.Status.Conditions = append(p.Status.Conditions, v1.PodCondition{Type: t, Status: s, Reason: reason, Message: msg,
		LastTransitionTime: metav1.NewTime(now.Truncate(time.Second))})
}

// runningStatus is the status the kubelet writes once the pod's container
// runs (the harness writes it as the set-up, not as a measured write).
func runningStatus(p *v1.Pod, ip string, now time.Time) {
	started := metav1.NewTime(now.Truncate(time.Second))
	t := true
	p.Status.Phase = v1.PodRunning
	p.Status.PodIP, p.Status.PodIPs = ip, []v1.PodIP{{IP: ip}}
	p.Status.HostIP, p.Status.HostIPs = "127.0.0.1", []v1.HostIP{{IP: "127.0.0.1"}}
	p.Status.StartTime = &started
	p.Status.ContainerStatuses = []v1.ContainerStatus{{
		Name: "app", Image: "busybox", ImageID: "sha256:0", Started: &t, Ready: true,
		ContainerID: containerID(p.UID, 0),
		State:       v1.ContainerState{Running: &v1.ContainerStateRunning{StartedAt: started}},
	}}
	setCondition(p, v1.PodScheduled, true, "", "", now)
	setCondition(p, v1.PodInitialized, true, "", "", now)
	setReadyConditions(p, now)
}

// containerID is the runtime ID of the pod's app container after n restarts.
func containerID(uid types.UID, n int) string { return fmt.Sprintf("cri-o://%s-r%d", uid, n) }

func (k *kubelet) registerContainer(key string, uid types.UID, n int) {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.containers[containerID(uid, n)[len("cri-o://"):]] = key
}

// containerLabels are the labels the kubelet gives a running container
// (kuberuntime's newContainerLabels): whose it is.
func (k *kubelet) containerLabels(id string) (map[string]string, bool) {
	k.mu.Lock()
	key, ok := k.containers[id]
	k.mu.Unlock()
	if !ok {
		return nil, false
	}
	ns, name, _ := cache.SplitMetaNamespaceKey(key)
	pod, err := k.lister.Pods(ns).Get(name)
	if err != nil || len(pod.Spec.Containers) == 0 {
		return nil, false
	}
	return map[string]string{
		"io.kubernetes.pod.namespace":  ns,
		"io.kubernetes.pod.name":       name,
		"io.kubernetes.pod.uid":        string(pod.UID),
		"io.kubernetes.container.name": pod.Spec.Containers[0].Name,
	}, true
}

// containerStopped is the runtime's report of a liveness kill: write the
// exit now and the restarted container after the back-off, as two status
// writes (the kubelet's PLEG sees the exit and the new container in
// separate relists).
func (k *kubelet) containerStopped(ctx context.Context, id string) {
	k.mu.Lock()
	key, ok := k.containers[id]
	delete(k.containers, id)
	n := k.restarts[key]
	k.restarts[key] = n + 1
	k.mu.Unlock()
	if !ok {
		return
	}
	if k.onKill != nil {
		k.onKill(key, n)
	}
	go func() {
		ns, name, _ := cache.SplitMetaNamespaceKey(key)
		// From the cache, as the kubelet's status manager works.
		pod, err := k.lister.Pods(ns).Get(name)
		if err != nil {
			k.writeErrors.Add(1)
			return
		}
		exited := metav1.Now()
		err = k.patchStatus(ctx, pod, func(p *v1.Pod) {
			cs := &p.Status.ContainerStatuses[0]
			started := cs.State.Running
			cs.Ready, cs.Started = false, ptr(false)
			term := &v1.ContainerStateTerminated{ExitCode: 137, Reason: "Error", FinishedAt: exited, ContainerID: cs.ContainerID}
			if started != nil {
				term.StartedAt = started.StartedAt
			}
			cs.LastTerminationState = v1.ContainerState{Terminated: term}
			cs.State = v1.ContainerState{Waiting: &v1.ContainerStateWaiting{Reason: "CrashLoopBackOff"}}
			setReadyConditions(p, exited.Time)
		})
		if err != nil {
			k.writeErrors.Add(1)
		}
		// The kubelet restarts at once the first time, then backs off
		// 10 s, 20 s, ... up to 5 min.
		if k.restartDelay != nil {
			select {
			case <-ctx.Done():
				return
			case <-time.After(k.restartDelay(n)):
			}
		} else if n > 0 {
			select {
			case <-ctx.Done():
				return
			case <-time.After(min(10*time.Second<<(n-1), 5*time.Minute)):
			}
		} else {
			select {
			case <-ctx.Done():
				return
			case <-time.After(time.Second): // one PLEG relist
			}
		}
		pod, err = k.lister.Pods(ns).Get(name)
		if err != nil {
			k.writeErrors.Add(1)
			return
		}
		k.registerContainer(key, pod.UID, n+1)
		now := time.Now()
		err = k.patchStatus(ctx, pod, func(p *v1.Pod) {
			cs := &p.Status.ContainerStatuses[0]
			cs.RestartCount = int32(n + 1)
			cs.ContainerID = containerID(p.UID, n+1)
			cs.State = v1.ContainerState{Running: &v1.ContainerStateRunning{StartedAt: metav1.NewTime(now.Truncate(time.Second))}}
			// No kubelet readiness probe: ready as soon as it runs.
			cs.Ready, cs.Started = true, ptr(true)
			setReadyConditions(p, now)
		})
		if err != nil {
			k.writeErrors.Add(1)
		}
	}()
}

func condition(p *v1.Pod, t string) *v1.PodCondition {
	for i := range p.Status.Conditions {
		if string(p.Status.Conditions[i].Type) == t {
			return &p.Status.Conditions[i]
		}
	}
	return nil
}

func condStatus(p *v1.Pod, t string) v1.ConditionStatus {
	if c := condition(p, t); c != nil {
		return c.Status
	}
	return ""
}

func ptr[T any](v T) *T { return &v }
