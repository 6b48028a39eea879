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
	var uid types.UID
	if pod != nil {
		uid = pod.UID
	}
	m.mu.Lock()
	prev, ok := m.cache[id]
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
	m.mu.Lock()
	defer m.mu.Unlock()
	if len(m.order) == 0 {
		return nil
	}
	out := make([]Update, 0, len(m.order))
	for _, id := range m.order {
		out = append(out, m.pending[id])
	}
	m.order = m.order[:0]
	clear(m.pending)
	return out
}
