package decorator

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
//   - At most maxInFlight of one pod's execs run at once, whether they hold
//     a slot or gave it up: giving a slot up never lets a pod start more.
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
	clock       clock.WithDelayedExecution
	total       int
	perPod      int
	maxInFlight int
	maxHold     time.Duration
	yielded     func() // counts a slot given up; may be nil

	mu      sync.Mutex
	used    int
	pods    map[string]*podSlots
	turns   []string    // pods with waiters, in the order they are served
	holders []*slotHold // in the order they took their slots: oldest first
	timer   clock.Timer // the next yield check; nil if none is due
}

// podSlots is one pod's share: its execs holding slots, those that gave
// their slot up and still run, and those waiting.
type podSlots struct {
	held    int
	yielded int
	waiting []*slotWaiter
}

// inFlight is how many of the pod's execs run now.
func (p *podSlots) inFlight() int { return p.held + p.yielded }

// slotWaiter is an exec waiting for a slot; granted is closed with hold set.
type slotWaiter struct {
	pod     string
	granted chan struct{}
	hold    *slotHold
}

// slotHold is a slot an exec holds until release, or until it yields it;
// a yielded exec still counts against its pod's maxInFlight until release.
type slotHold struct {
	s        *execSlots
	pod      string
	since    time.Time
	yielded  bool // the slot was given up; the exec runs on
	released bool
}

func newExecSlots(total, perPod, maxInFlight int, maxHold time.Duration, c clock.WithDelayedExecution, yielded func()) *execSlots {
	if perPod < 1 || perPod > total {
		perPod = total
	}
	if maxInFlight < perPod {
		maxInFlight = perPod
	}
	return &execSlots{clock: c, total: total, perPod: perPod, maxInFlight: maxInFlight, maxHold: maxHold, yielded: yielded, pods: map[string]*podSlots{}}
}

// acquire waits for a slot for one of pod's execs, at most wait (<= 0: no
// bound). It returns nil and false when the wait ran out or ctx ended.
func (s *execSlots) acquire(ctx context.Context, pod string, wait time.Duration) (*slotHold, bool) {
	s.mu.Lock()
	p := s.pod(pod)
	if s.used < s.total && s.mayStartLocked(p) && len(p.waiting) == 0 {
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

// release ends the exec's claim: its slot, or, if it gave the slot up,
// its place in its pod's execs in flight. Twice is once.
func (h *slotHold) release() {
	s := h.s
	s.mu.Lock()
	defer s.mu.Unlock()
	if h.released {
		return
	}
	h.released = true
	if h.yielded {
		s.pods[h.pod].yielded--
	} else {
		s.freeLocked(h)
	}
	s.dropIdleLocked(h.pod)
	s.dispatchLocked()
}

// mayStartLocked: p is under its share of slots and its cap in flight.
func (s *execSlots) mayStartLocked(p *podSlots) bool {
	return p.held < s.perPod && p.inFlight() < s.maxInFlight
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

// freeLocked gives h's slot back.
func (s *execSlots) freeLocked(h *slotHold) {
	s.used--
	s.pods[h.pod].held--
	for i, x := range s.holders {
		if x == h {
			s.holders = append(s.holders[:i], s.holders[i+1:]...)
			break
		}
	}
}

// dropIdleLocked forgets a pod with nothing in flight and no waiter.
func (s *execSlots) dropIdleLocked(pod string) {
	if p := s.pods[pod]; p.inFlight() == 0 && len(p.waiting) == 0 {
		delete(s.pods, pod)
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

// nextTurnLocked is the index in turns of the first pod that may start
// an exec.
func (s *execSlots) nextTurnLocked() int {
	for i, pod := range s.turns {
		if s.mayStartLocked(s.pods[pod]) {
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
		s.dropIdleLocked(w.pod)
	}
}

// helpsLocked reports whether h giving up its slot would let a waiter in:
// one of its own pod's while the pod is under its cap in flight (h still
// counts there), or one of a pod that may start an exec.
func (s *execSlots) helpsLocked(h *slotHold) bool {
	for _, pod := range s.turns {
		p := s.pods[pod]
		if (pod == h.pod && p.inFlight() < s.maxInFlight) || s.mayStartLocked(p) {
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
		h.yielded = true
		s.pods[h.pod].yielded++
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
