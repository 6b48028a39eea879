package results

import (
	"sync"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
)

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
//   - a change is reported once, only when the result differs from the cached one;
//   - a consumer that falls behind sees the latest result per container, not every step.
type Manager interface {
	Get(containerID string) (Result, bool)
	// Set caches the result and queues an update if it changed.
	Set(containerID string, result Result, pod *v1.Pod)
	// Remove forgets the container. It queues no update.
	Remove(containerID string)
	// Updates is signalled (coalesced) whenever Drain has something to return.
	Updates() <-chan struct{}
	// Drain returns the pending updates, the latest per container, and clears them.
	Drain() []Update
}

type manager struct {
	mu      sync.RWMutex
	cache   map[string]Result
	pending map[string]Update
	order   []string
	signal  chan struct{}
}

// NewManager returns an empty Manager.
func NewManager() Manager {
	return &manager{
		cache:   map[string]Result{},
		pending: map[string]Update{},
		signal:  make(chan struct{}, 1),
	}
}

func (m *manager) Get(id string) (Result, bool) {
	m.mu.RLock()
	defer m.mu.RUnlock()
	r, ok := m.cache[id]
	return r, ok
}

func (m *manager) Set(id string, result Result, pod *v1.Pod) {
	// Most calls repeat the cached result: check under the read lock so
	// workers ticking at once do not serialise on the write lock.
	m.mu.RLock()
	prev, ok := m.cache[id]
	m.mu.RUnlock()
	if ok && prev == result {
		return
	}
	var uid types.UID
	if pod != nil {
		uid = pod.UID
	}
	m.mu.Lock()
	prev, ok = m.cache[id]
	if ok && prev == result {
		m.mu.Unlock()
		return
	}
	m.cache[id] = result
	if _, queued := m.pending[id]; !queued {
		m.order = append(m.order, id)
	}
	m.pending[id] = Update{ContainerID: id, Result: result, PodUID: uid}
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
