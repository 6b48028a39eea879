package cri

import (
	"context"
	"sync"
	"time"

	"k8s.io/utils/clock"
)

// execSlots shares the node's exec slots between pods, so that no pod's
// execs, hung or not, keep another pod's from running.
//
// What it promises:
//   - At most total execs hold a slot at once, and at most perPod of one
//     pod's.
//   - A freed slot goes to the pods that wait in turn (round robin): one
//     exec of each waiting pod before a second of any; within a pod, first
//     come, first served.
//   - An exec that has held its slot for maxHold while others wait for one
//     gives it up and runs on without it, to its own timeout: a hung exec
//     keeps no one waiting longer than maxHold. (maxHold <= 0: never.)
//   - A waiter that its context or its wait bound ends leaves the queue.
//
// golang.org/x/sync/semaphore queues all callers in one line; a pod with
// ten waiting execs would then be served ten times before the next pod.
type execSlots struct {
	clock   clock.WithDelayedExecution
	total   int
	perPod  int
	maxHold time.Duration
	yielded func() // counts a slot given up; may be nil

	mu      sync.Mutex
	used    int
	pods    map[string]*podSlots
	turns   []string    // pods with waiters, in the order they are served
	holders []*slotHold // in the order they took their slots: oldest first
	timer   clock.Timer // the next yield check; nil if none is due
}

// podSlots is one pod's share: its execs holding slots, and those waiting.
type podSlots struct {
	held    int
	waiting []*slotWaiter
}

// slotWaiter is an exec waiting for a slot; granted is closed with hold set.
type slotWaiter struct {
	pod     string
	granted chan struct{}
	hold    *slotHold
}

// slotHold is a slot an exec holds until release, or until it yields it.
type slotHold struct {
	s     *execSlots
	pod   string
	since time.Time
	gone  bool // released or yielded
}

func newExecSlots(total, perPod int, maxHold time.Duration, c clock.WithDelayedExecution, yielded func()) *execSlots {
	if perPod < 1 || perPod > total {
		perPod = total
	}
	return &execSlots{clock: c, total: total, perPod: perPod, maxHold: maxHold, yielded: yielded, pods: map[string]*podSlots{}}
}

// acquire waits for a slot for one of pod's execs, at most wait (<= 0: no
// bound). It returns nil and false when the wait ran out or ctx ended.
func (s *execSlots) acquire(ctx context.Context, pod string, wait time.Duration) (*slotHold, bool) {
	s.mu.Lock()
	p := s.pod(pod)
	if s.used < s.total && p.held < s.perPod && len(p.waiting) == 0 {
		h := s.grantLocked(pod)
		s.mu.Unlock()
		return h, true
	}
	w := &slotWaiter{pod: pod, granted: make(chan struct{})}
	if len(p.waiting) == 0 {
		s.turns = append(s.turns, pod)
	}
	p.waiting = append(p.waiting, w)
	s.scheduleYieldLocked()
	s.mu.Unlock()

	var expired <-chan time.Time
	if wait > 0 {
		t := s.clock.NewTimer(wait)
		defer t.Stop()
		expired = t.C()
	}
	select {
	case <-w.granted:
		return w.hold, true
	case <-expired:
	case <-ctx.Done():
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	select {
	case <-w.granted: // granted as the wait ended: take it
		return w.hold, true
	default:
	}
	s.leaveLocked(w)
	return nil, false
}

// release gives the slot back, unless it was given up already.
func (h *slotHold) release() {
	s := h.s
	s.mu.Lock()
	defer s.mu.Unlock()
	if h.gone {
		return
	}
	s.freeLocked(h)
	s.dispatchLocked()
}

func (s *execSlots) pod(name string) *podSlots {
	p := s.pods[name]
	if p == nil {
		p = &podSlots{}
		s.pods[name] = p
	}
	return p
}

func (s *execSlots) grantLocked(pod string) *slotHold {
	s.used++
	s.pods[pod].held++
	h := &slotHold{s: s, pod: pod, since: s.clock.Now()}
	s.holders = append(s.holders, h)
	return h
}

// freeLocked takes h off the books.
func (s *execSlots) freeLocked(h *slotHold) {
	h.gone = true
	s.used--
	p := s.pods[h.pod]
	p.held--
	if p.held == 0 && len(p.waiting) == 0 {
		delete(s.pods, h.pod)
	}
	for i, x := range s.holders {
		if x == h {
			s.holders = append(s.holders[:i], s.holders[i+1:]...)
			break
		}
	}
}

// dispatchLocked hands free slots to waiting pods in turn, then sees
// whether a holder should yield to those still waiting.
func (s *execSlots) dispatchLocked() {
	for s.used < s.total {
		i := s.nextTurnLocked()
		if i < 0 {
			break
		}
		pod := s.turns[i]
		p := s.pods[pod]
		w := p.waiting[0]
		p.waiting = p.waiting[1:]
		s.turns = append(s.turns[:i], s.turns[i+1:]...)
		if len(p.waiting) > 0 {
			s.turns = append(s.turns, pod) // to the back of the line
		}
		w.hold = s.grantLocked(pod)
		close(w.granted)
	}
	s.scheduleYieldLocked()
}

// nextTurnLocked is the index in turns of the first pod under its share.
func (s *execSlots) nextTurnLocked() int {
	for i, pod := range s.turns {
		if s.pods[pod].held < s.perPod {
			return i
		}
	}
	return -1
}

// leaveLocked takes a waiter that gave up out of its pod's queue.
func (s *execSlots) leaveLocked(w *slotWaiter) {
	p := s.pods[w.pod]
	for i, x := range p.waiting {
		if x == w {
			p.waiting = append(p.waiting[:i], p.waiting[i+1:]...)
			break
		}
	}
	if len(p.waiting) == 0 {
		for i, pod := range s.turns {
			if pod == w.pod {
				s.turns = append(s.turns[:i], s.turns[i+1:]...)
				break
			}
		}
		if p.held == 0 {
			delete(s.pods, w.pod)
		}
	}
}

// helpsLocked reports whether h giving up its slot would let a waiter in:
// one of its own pod's, or one of a pod under its share.
func (s *execSlots) helpsLocked(h *slotHold) bool {
	for _, pod := range s.turns {
		if pod == h.pod || s.pods[pod].held < s.perPod {
			return true
		}
	}
	return false
}

// scheduleYieldLocked makes the holders that have had their slot for
// maxHold, and whose slot a waiter could use, give it up; and arms the
// timer for the next one due.
func (s *execSlots) scheduleYieldLocked() {
	if s.timer != nil {
		s.timer.Stop()
		s.timer = nil
	}
	if s.maxHold <= 0 || len(s.turns) == 0 {
		return
	}
	now := s.clock.Now()
	for _, h := range append([]*slotHold(nil), s.holders...) {
		if !s.helpsLocked(h) {
			continue
		}
		if due := h.since.Add(s.maxHold); due.After(now) {
			// Its own goroutine: a fake clock runs the function with its
			// lock held, and yieldDue reads the clock.
			s.timer = s.clock.AfterFunc(due.Sub(now), func() { go s.yieldDue() })
			return
		}
		s.freeLocked(h)
		if s.yielded != nil {
			s.yielded()
		}
		s.dispatchLocked() // re-arms the timer
		return
	}
}

func (s *execSlots) yieldDue() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.timer = nil
	s.scheduleYieldLocked()
}
