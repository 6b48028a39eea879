package worker

import (
	"sync"
	"time"

	"k8s.io/utils/clock"
)

// Scheduler wakes workers on their tick grids (Config.Scheduler). Every
// worker of a daemon shares one, made by NewScheduler: the hand-rolled timer
// heap below, which BenchmarkScheduler50k measures against a time.Ticker per
// worker at 50,000 workers (docs/benchmarks/ANALYSIS.md).
type Scheduler interface {
	// add registers w: its first tick is due after first if first > 0,
	// else after one period; ticks then follow every period.
	add(w *Worker, first, period time.Duration)
	// reset restarts w's grid one period from now and drops a pending tick.
	reset(w *Worker)
	// remove forgets w.
	remove(w *Worker)
	// now is the scheduler's time in nanoseconds, on which ticks' dues are.
	now() int64
}

// NewScheduler returns the timer heap on c, for all the workers that share it.
func NewScheduler(c clock.Clock) Scheduler { return newScheduler(c) }

// scheduler wakes workers on their tick grids from one timer, instead of
// one runtime timer per worker: an idle worker is then a goroutine parked on
// one channel, with no timer and no multi-way select to re-arm per tick.
//
// Each worker's ticks keep time.Ticker's semantics: a fixed grid of periods
// from its first due time; a tick that finds the previous one still pending
// is dropped, so at most one late tick is delivered. Entries are removed
// lazily: a worker that is reset or leaves bumps its generation, and a stale
// entry is dropped when it reaches the top of the heap.
type scheduler struct {
	clock clock.Clock
	base  time.Time // dues are nanoseconds since base, on the clock's monotonic reading

	// Workers only queue requests (add, reset) under reqMu, for an append:
	// tens of thousands of them starting at once must not convoy on mu,
	// which the loop holds while it delivers a batch.
	reqMu   sync.Mutex
	reqs    []request
	running bool // the loop goroutine is running

	mu       sync.Mutex
	heap     []entry
	live     int // added workers not yet removed
	timer    clock.Timer
	timerC   <-chan time.Time
	armedFor int64 // the due the timer is armed for; -1 if disarmed
	kick     chan struct{}
	batch    []*Worker
	spare    []request
}

type entry struct {
	due int64
	w   *Worker
	gen uint32
}

// request asks the loop to (re)start w's grid at due; add also counts w in.
type request struct {
	w   *Worker
	due int64
	add bool
}

func newScheduler(c clock.Clock) *scheduler {
	return &scheduler{clock: c, base: c.Now(), armedFor: -1, kick: make(chan struct{}, 1)}
}

// now is the scheduler's time, in nanoseconds since base.
func (s *scheduler) now() int64 { return int64(s.clock.Since(s.base)) }

// add registers w: its first tick is due after first if first > 0, else
// after one period; ticks then follow every period.
func (s *scheduler) add(w *Worker, first, period time.Duration) {
	w.period = int64(period)
	if first <= 0 {
		first = period
	}
	s.request(request{w, s.now() + int64(first), true})
}

// reset restarts w's grid one period from now and drops a pending tick.
func (s *scheduler) reset(w *Worker) {
	w.pending.Store(0)
	s.request(request{w, s.now() + w.period, false})
}

func (s *scheduler) request(r request) {
	s.reqMu.Lock()
	s.reqs = append(s.reqs, r)
	start := !s.running
	s.running = true
	s.reqMu.Unlock()
	if start {
		go s.loop()
		return
	}
	select {
	case s.kick <- struct{}{}:
	default:
	}
}

// remove forgets w. The last worker out stops the timer at once, so no timer
// outlives the workers.
func (s *scheduler) remove(w *Worker) {
	s.mu.Lock()
	defer s.mu.Unlock()
	w.gen++
	w.gone = true
	if w.added {
		w.added = false
		s.live--
	}
	if s.live == 0 {
		clear(s.heap)
		s.heap = s.heap[:0]
		s.disarm()
	}
	select {
	case s.kick <- struct{}{}:
	default:
	}
}

// apply takes the queued requests. Called under mu.
func (s *scheduler) apply() {
	s.reqMu.Lock()
	reqs := s.reqs
	s.reqs = s.spare[:0]
	s.reqMu.Unlock()
	for _, r := range reqs {
		w := r.w
		if w.gone {
			continue
		}
		if r.add {
			w.added = true
			s.live++
		}
		w.gen++
		w.pending.Store(0) // a tick of the old grid delivered since
		s.push(entry{r.due, w, w.gen})
	}
	clear(reqs)
	s.spare = reqs[:0]
}

// loop applies requests, delivers due ticks, arms the timer for the next,
// and waits. It ends when no entry and no request is left.
func (s *scheduler) loop() {
	for {
		s.mu.Lock()
		s.apply()
		now := s.now()
		batch := s.batch[:0]
		for len(s.heap) > 0 && s.heap[0].due <= now {
			e := &s.heap[0]
			w := e.w
			if e.gen != w.gen {
				s.pop()
				continue
			}
			if w.pending.CompareAndSwap(0, e.due+1) {
				batch = append(batch, w)
			}
			next := e.due + w.period
			if next <= now { // missed ticks are dropped, as time.Ticker does
				next += ((now-next)/w.period + 1) * w.period
			}
			e.due = next
			s.down(0)
		}
		for len(s.heap) > 0 && s.heap[0].gen != s.heap[0].w.gen {
			s.pop()
		}
		exit := false
		if len(s.heap) == 0 {
			s.disarm()
			s.reqMu.Lock()
			if exit = len(s.reqs) == 0; exit {
				s.running = false
			}
			s.reqMu.Unlock()
		} else if s.heap[0].due != s.armedFor {
			s.arm(time.Duration(s.heap[0].due-now), s.heap[0].due)
		}
		s.batch = batch[:0]
		timerC := s.timerC
		s.mu.Unlock()
		for i, w := range batch {
			w.signal()
			batch[i] = nil
		}
		if exit {
			return
		}
		select {
		case <-timerC:
			s.mu.Lock()
			s.armedFor = -1
			s.mu.Unlock()
		case <-s.kick:
		}
	}
}

// arm sets the timer to fire after d, for the entry due at due.
func (s *scheduler) arm(d time.Duration, due int64) {
	if s.timer == nil {
		s.timer = s.clock.NewTimer(d)
		s.timerC = s.timer.C()
	} else {
		s.timer.Stop()
		select {
		case <-s.timerC:
		default:
		}
		s.timer.Reset(d)
	}
	s.armedFor = due
	// A clock that moved past due between the caller reading it and the
	// timer being set left the timer late; go round instead of waiting.
	if s.now() >= due {
		select {
		case s.kick <- struct{}{}:
		default:
		}
	}
}

func (s *scheduler) disarm() {
	if s.timer != nil && s.armedFor >= 0 {
		s.timer.Stop()
	}
	s.armedFor = -1
}

// A binary min-heap on due, kept by hand: container/heap's interface calls
// and a per-worker index would cost more than they save.

func (s *scheduler) push(e entry) {
	s.heap = append(s.heap, e)
	s.up(len(s.heap) - 1)
}

func (s *scheduler) pop() {
	n := len(s.heap) - 1
	s.heap[0] = s.heap[n]
	s.heap[n] = entry{}
	s.heap = s.heap[:n]
	if n > 0 {
		s.down(0)
	}
}

func (s *scheduler) up(i int) {
	h := s.heap
	for i > 0 {
		p := (i - 1) / 2
		if h[p].due <= h[i].due {
			return
		}
		h[p], h[i] = h[i], h[p]
		i = p
	}
}

func (s *scheduler) down(i int) {
	h := s.heap
	n := len(h)
	for {
		l := 2*i + 1
		if l >= n {
			return
		}
		m := l
		if r := l + 1; r < n && h[r].due < h[l].due {
			m = r
		}
		if h[i].due <= h[m].due {
			return
		}
		h[i], h[m] = h[m], h[i]
		i = m
	}
}
