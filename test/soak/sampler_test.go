//go:build soak

package soak

import (
	"context"
	"fmt"
	"os"
	"strings"
	"sync"
	"time"
)

// sampler records /proc every sampleEvery and /metrics every scrapeEvery
// (the /metrics of 2,000 pods is large; Prometheus scrapes about as often).
type sampler struct {
	p     *probedProc
	start time.Time
	mu    sync.Mutex
	proc  []procSample
	mets  []metricsSample
	load  []float64
}

func (s *sampler) run() (stop func()) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		tick := time.NewTicker(sampleEvery)
		defer tick.Stop()
		var lastScrape time.Time
		for {
			if pr, err := s.p.procSample(); err == nil {
				pr.Elapsed = time.Since(s.start).Seconds()
				s.mu.Lock()
				s.proc = append(s.proc, pr)
				s.mu.Unlock()
			}
			if time.Since(lastScrape) >= scrapeEvery {
				lastScrape = time.Now()
				if m, err := s.p.metrics(); err == nil {
					m.Elapsed = time.Since(s.start).Seconds()
					s.mu.Lock()
					s.mets = append(s.mets, m)
					s.load = append(s.load, load1())
					s.mu.Unlock()
				}
			}
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
		}
	}()
	return func() { cancel(); <-done }
}

func loadavg() string {
	b, _ := os.ReadFile("/proc/loadavg")
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return "?"
	}
	return strings.Join(f[:3], " ")
}

func load1() float64 {
	var l float64
	_, _ = fmt.Sscan(loadavg(), &l)
	return l
}
