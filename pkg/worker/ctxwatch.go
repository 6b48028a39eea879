package worker

import (
	"context"
	"sync"
)

// Watches stops workers when the context their Run was given ends
// (Config.Watches). Workers share it, so that tens of thousands of them run
// with one context cost one context.AfterFunc (and one entry among the
// context's children), not one each. The zero value is ready to use.
type Watches struct {
	mu sync.Mutex
	m  map[<-chan struct{}]*ctxWatch
}

// NewWatches returns an empty registry.
func NewWatches() *Watches { return &Watches{} }

// ctxWatch is the workers run with one context.
type ctxWatch struct {
	reg     *Watches
	done    <-chan struct{}
	stop    func() bool
	workers map[*Worker]struct{} // nil once fired
}

// watch has w stopped when ctx ends; nil if ctx never ends.
func (r *Watches) watch(ctx context.Context, w *Worker) *ctxWatch {
	done := ctx.Done()
	if done == nil {
		return nil
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	cw := r.m[done]
	if cw == nil {
		if r.m == nil {
			r.m = map[<-chan struct{}]*ctxWatch{}
		}
		cw = &ctxWatch{reg: r, done: done, workers: map[*Worker]struct{}{}}
		r.m[done] = cw
		cw.stop = context.AfterFunc(ctx, cw.fire)
	}
	cw.workers[w] = struct{}{}
	return cw
}

func (cw *ctxWatch) fire() {
	r := cw.reg
	r.mu.Lock()
	ws := cw.workers
	cw.workers = nil
	if r.m[cw.done] == cw {
		delete(r.m, cw.done)
	}
	r.mu.Unlock()
	for w := range ws {
		w.Stop()
	}
}

// leave forgets w; the last worker out stops the watch.
func (cw *ctxWatch) leave(w *Worker) {
	if cw == nil {
		return
	}
	r := cw.reg
	r.mu.Lock()
	defer r.mu.Unlock()
	if cw.workers == nil {
		return
	}
	delete(cw.workers, w)
	if len(cw.workers) == 0 {
		cw.stop()
		cw.workers = nil
		if r.m[cw.done] == cw {
			delete(r.m, cw.done)
		}
	}
}
