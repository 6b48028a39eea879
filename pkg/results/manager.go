package results

import (
	"sync"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
)

// Value is a published result and what decided it.
type Value struct {
	Result Result
	// Output is the output, or error text, of the probe whose result
	// decided Value; it travels with the result so that a condition's
	// message always belongs to the result that set it.
	Output string
	// Probed: a probe decided the result. False for the initial value of a
	// new container instance and for results set without a probe (the
	// container stopped, the pod is being deleted).
	Probed bool
	// Seeded: the result is a seed (what probed had established before
	// it restarted, or before an edit of the probe), which no probe of
	// the current worker has confirmed yet.
	Seeded bool
}

// Update is the latest result of one container instance.
type Update struct {
	ContainerID string
	Result      Result
	PodUID      types.UID
}

// Manager caches one probe type's result per container ID.
//
// It promises that:
//   - Set never blocks, however slow the consumer;
//   - a change is reported once, only when the result, or whether a probe
//     decided it, differs from the cached one; a repeat of the same result
//     keeps the output of the probe that first decided it;
//   - a consumer that falls behind sees the latest result per container, not every step;
//   - a cache made by NewCache reports nothing and so holds nothing but
//     the results themselves.
type Manager interface {
	Get(containerID string) (Value, bool)
	// Set caches the value and queues an update if it changed.
	Set(containerID string, v Value, pod *v1.Pod)
	// Remove forgets the container. It queues no update.
	Remove(containerID string)
	// Updates is signalled (coalesced) whenever Drain has something to return.
	Updates() <-chan struct{}
	// Drain returns the pending updates, the latest per container, and clears them.
	Drain() []Update
}

type manager struct {
	// report: changes are queued for Drain; false for a NewCache.
	report  bool
	mu      sync.RWMutex
	cache   map[string]Value
	pending map[string]Update
	order   []string
	signal  chan struct{}
}

// NewManager returns an empty Manager that reports changes.
func NewManager() Manager {
	return &manager{
		report:  true,
		cache:   map[string]Value{},
		pending: map[string]Update{},
		signal:  make(chan struct{}, 1),
	}
}

// NewCache returns an empty Manager for results nobody consumes as updates
// (liveness: its worker acts on its own results). Updates never fires and
// Drain returns nil, so nothing accumulates per container instance.
func NewCache() Manager {
	return &manager{cache: map[string]Value{}, signal: make(chan struct{})}
}

func (m *manager) Get(id string) (Value, bool) {
	m.mu.RLock()
	defer m.mu.RUnlock()
	v, ok := m.cache[id]
	return v, ok
}

func same(a, b Value) bool { return a.Result == b.Result && a.Probed == b.Probed }

func (m *manager) Set(id string, v Value, pod *v1.Pod) {
	// Most calls repeat the cached result: check under the read lock so
	// workers ticking at once do not serialise on the write lock.
	m.mu.RLock()
	prev, ok := m.cache[id]
	m.mu.RUnlock()
	if ok && same(prev, v) {
		return
	}
	var uid types.UID
	if pod != nil {
		uid = pod.UID
	}
	m.mu.Lock()
	prev, ok = m.cache[id]
	if ok && same(prev, v) {
		m.mu.Unlock()
		return
	}
	m.cache[id] = v
	if !m.report {
		m.mu.Unlock()
		return
	}
	if _, queued := m.pending[id]; !queued {
		m.order = append(m.order, id)
	}
	m.pending[id] = Update{ContainerID: id, Result: v.Result, PodUID: uid}
	m.mu.Unlock()
	select {
	case m.signal <- struct{}{}:
	default:
	}
}

func (m *manager) Remove(id string) {
	m.mu.Lock()
	delete(m.cache, id)
	m.mu.Unlock()
}

func (m *manager) Updates() <-chan struct{} { return m.signal }

func (m *manager) Drain() []Update {
	// Swap the queue out and build the answer unlocked: with tens of
	// thousands of workers setting results, a long write lock here would
	// stall them all.
	m.mu.Lock()
	if len(m.order) == 0 {
		m.mu.Unlock()
		return nil
	}
	order, pending := m.order, m.pending
	// Sized for a burst like this one, so that the workers' next inserts do
	// not grow them (on the workers' small stacks).
	m.order, m.pending = make([]string, 0, len(order)), make(map[string]Update, len(pending))
	m.mu.Unlock()
	out := make([]Update, 0, len(order))
	for _, id := range order {
		out = append(out, pending[id])
	}
	return out
}
