package podinformer

import (
	"context"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/klog/v2"
	podsv1alpha1 "k8s.io/kubelet/pkg/apis/pods/v1alpha1"
)

// kubeletWatch is one informer watch over the kubelet's Pods API: one
// stream at a time, swapped for a new one every relist period.
type kubeletWatch struct {
	k      *KubeletListerWatcher
	ctx    context.Context
	cancel context.CancelFunc
	result chan watch.Event
}

func newKubeletWatch(parent context.Context, k *KubeletListerWatcher) *kubeletWatch {
	ctx, cancel := context.WithCancel(parent)
	return &kubeletWatch{k: k, ctx: ctx, cancel: cancel, result: make(chan watch.Event)}
}

func (w *kubeletWatch) ResultChan() <-chan watch.Event { return w.result }
func (w *kubeletWatch) Stop()                          { w.cancel() }

// run serves s until it fails or the watch is stopped. synced says the
// informer already holds s's snapshot (the List read it).
func (w *kubeletWatch) run(s *stream, synced bool) {
	defer close(w.result)
	cur := s
	defer func() { cur.close() }()
	if !synced && !w.resync(cur) {
		return
	}
	w.k.up()
	events := cur.events()
	ticker := w.k.clock.NewTicker(w.k.relist)
	defer ticker.Stop()
	for {
		select {
		case <-w.ctx.Done():
			return
		case r := <-events:
			if r.err != nil {
				if w.ctx.Err() == nil {
					w.k.failed("watching", r.err, true)
				}
				return
			}
			if !w.apply(r.ev) {
				return
			}
		case <-ticker.C():
			next, err := w.k.open(false)
			if err != nil {
				continue // the current stream still serves
			}
			if !w.resync(next) {
				next.close()
				if w.ctx.Err() != nil {
					return
				}
				continue
			}
			cur.close()
			cur, events = next, next.events()
			w.k.up()
		}
	}
}

// resync reads s's snapshot and sends what differs from what the informer
// holds: new and changed pods, and deletions of pods it no longer lists.
func (w *kubeletWatch) resync(s *stream) bool {
	pods, err := s.snapshot(w.ctx)
	if err != nil {
		if w.ctx.Err() == nil {
			w.k.failed("relisting", err, false)
		}
		return false
	}
	var out []watch.Event
	w.k.mu.Lock()
	seen := make(map[types.UID]bool, len(pods))
	for _, p := range pods {
		seen[p.pod.UID] = true
		if ev, ok := w.k.noteLocked(p); ok {
			out = append(out, ev)
		}
	}
	for uid, kp := range w.k.known {
		if !seen[uid] {
			delete(w.k.known, uid)
			out = append(out, watch.Event{Type: watch.Deleted, Object: kp.stub(uid)})
		}
	}
	w.k.forgetFinishedLocked(seen)
	w.k.mu.Unlock()
	for _, ev := range out {
		if !w.emit(ev) {
			return false
		}
	}
	return true
}

// apply sends one event of the stream on, if it changes anything.
func (w *kubeletWatch) apply(ev *podsv1alpha1.WatchPodsEvent) bool {
	switch ev.GetType() {
	case podsv1alpha1.EventType_ADDED, podsv1alpha1.EventType_MODIFIED:
		d, err := decode(ev.GetPod())
		if err != nil {
			w.k.metrics.errors.WithLabelValues("Decode").Inc()
			klog.ErrorS(err, "Skipping a pod the kubelet's Pods API sent")
			return true
		}
		w.k.mu.Lock()
		out, ok := w.k.noteLocked(d)
		w.k.mu.Unlock()
		return !ok || w.emit(out)
	case podsv1alpha1.EventType_DELETED:
		p := &v1.Pod{}
		if err := p.Unmarshal(ev.GetPod()); err != nil || p.UID == "" {
			w.k.metrics.errors.WithLabelValues("Decode").Inc()
			klog.ErrorS(err, "Skipping a pod deletion the kubelet's Pods API sent")
			return true
		}
		w.k.mu.Lock()
		kp, ok := w.k.known[p.UID]
		delete(w.k.known, p.UID)
		w.k.finished[p.UID] = true
		w.k.mu.Unlock()
		return !ok || w.emit(watch.Event{Type: watch.Deleted, Object: kp.stub(p.UID)})
	}
	return true
}

// emit hands ev to the informer. If the watch is stopped first, the
// informer may lack what known says it holds: the next Watch then asks
// for a List.
func (w *kubeletWatch) emit(ev watch.Event) bool {
	select {
	case w.result <- ev:
		return true
	case <-w.ctx.Done():
		w.k.mu.Lock()
		w.k.dirty = true
		w.k.mu.Unlock()
		return false
	}
}

// noteLocked records d and returns the event that tells the informer, if
// d is new or changed and not finished.
func (k *KubeletListerWatcher) noteLocked(d decoded) (watch.Event, bool) {
	uid := d.pod.UID
	if k.finished[uid] {
		return watch.Event{}, false
	}
	old, ok := k.known[uid]
	if ok && old.sum == d.sum {
		return watch.Event{}, false
	}
	k.known[uid] = knownPod{namespace: d.pod.Namespace, name: d.pod.Name, sum: d.sum}
	if ok {
		return watch.Event{Type: watch.Modified, Object: d.pod}, true
	}
	return watch.Event{Type: watch.Added, Object: d.pod}, true
}

// stub is the deleted pod as the informer needs it: its key and UID.
func (kp knownPod) stub(uid types.UID) *v1.Pod {
	return &v1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: kp.namespace, Name: kp.name, UID: uid}}
}

type received struct {
	ev  *podsv1alpha1.WatchPodsEvent
	err error
}

// events reads the stream in a goroutine that ends with it.
func (s *stream) events() <-chan received {
	ch := make(chan received)
	go func() {
		for {
			ev, err := s.recv()
			select {
			case ch <- received{ev, err}:
			case <-s.done:
				return
			}
			if err != nil {
				return
			}
		}
	}()
	return ch
}

var _ watch.Interface = (*kubeletWatch)(nil)
