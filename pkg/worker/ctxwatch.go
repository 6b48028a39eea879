package worker

import (
	"context"
	"sync"
)

// ctxWatch stops the workers run with one context when it ends. Workers
// share it, so that tens of thousands of them cost one context.AfterFunc
// (and one entry among the context's children), not one each.
type ctxWatch struct {
	done    <-chan struct{}
	stop    func() bool
	workers map[*Worker]struct{} // nil once fired
}

var watches struct {
	mu sync.Mutex
	m  map[<-chan struct{}]*ctxWatch
}

// watchCtx has w stopped when ctx ends; nil if ctx never ends.
func watchCtx(ctx context.Context, w *Worker) *ctxWatch {
	done := ctx.Done()
	if done == nil {
		return nil
	}
	watches.mu.Lock()
	defer watches.mu.Unlock()
	cw := watches.m[done]
	if cw == nil {
		if watches.m == nil {
			watches.m = map[<-chan struct{}]*ctxWatch{}
		}
		cw = &ctxWatch{done: done, workers: map[*Worker]struct{}{}}
		watches.m[done] = cw
		cw.stop = context.AfterFunc(ctx, cw.fire)
	}
	cw.workers[w] = struct{}{}
	return cw
}

func (cw *ctxWatch) fire() {
	watches.mu.Lock()
	ws := cw.workers
	cw.workers = nil
	if watches.m[cw.done] == cw {
		delete(watches.m, cw.done)
	}
	watches.mu.Unlock()
	for w := range ws {
		w.Stop()
	}
}

// leave forgets w; the last worker out stops the watch.
func (cw *ctxWatch) leave(w *Worker) {
	if cw == nil {
		return
	}
	watches.mu.Lock()
	defer watches.mu.Unlock()
	if cw.workers == nil {
		return
	}
	delete(cw.workers, w)
	if len(cw.workers) == 0 {
		cw.stop()
		cw.workers = nil
		if watches.m[cw.done] == cw {
			delete(watches.m, cw.done)
		}
	}
}
