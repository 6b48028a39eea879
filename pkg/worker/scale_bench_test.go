//go:build linux

package worker

import (
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/utils/clock"

	"github.com/probed-dev/probed/pkg/probespec"
	"github.com/probed-dev/probed/pkg/results"
)

// The two hand-rolled pieces of the worker, each against what it replaces,
// at 50,000 workers:
//
//	go test -run '^$' -bench 'Scheduler50k|Series50k' -benchtime 1x ./pkg/worker/
//
// docs/benchmarks/ANALYSIS.md has the figures.

const scaleWorkers = 50_000

// BenchmarkScheduler50k: idle workers ticking every second, woken by the
// timer heap (a goroutine parked on its wake channel each) or by a
// time.Ticker each (a goroutine in a select on its ticker and its wake
// channel, the kubelet's design), the same Worker struct in both. Reports
// process CPU per tick and memory (heap and stacks) per worker.
func BenchmarkScheduler50k(b *testing.B) {
	const period, window = time.Second, 3 * time.Second
	for _, impl := range []string{"heap", "ticker-per-worker"} {
		b.Run(impl, func(b *testing.B) {
			for b.Loop() {
				var ticks atomic.Int64
				var wg sync.WaitGroup
				stop := make(chan struct{})
				before := memInUse()
				var stopAll func()
				switch impl {
				case "heap":
					s := newScheduler(clock.RealClock{})
					ws := make([]*Worker, scaleWorkers)
					for i := range ws {
						w := &Worker{wake: make(chan struct{}, 1)}
						ws[i] = w
						wg.Add(1)
						go func() {
							defer wg.Done()
							for {
								select {
								case <-w.wake:
								case <-stop:
									return
								}
								if w.pending.Swap(0) != 0 {
									ticks.Add(1)
								}
							}
						}()
						s.add(w, time.Duration(i)*period/scaleWorkers, period)
					}
					stopAll = func() {
						for _, w := range ws {
							s.remove(w)
						}
					}
				default:
					ws := make([]*Worker, scaleWorkers) // the same worker, for the same memory
					for i := range ws {
						w := &Worker{wake: make(chan struct{}, 1)}
						ws[i] = w
						wg.Add(1)
						go func() {
							defer wg.Done()
							time.Sleep(time.Duration(i) * period / scaleWorkers)
							t := time.NewTicker(period)
							defer t.Stop()
							for {
								select {
								case <-t.C:
									ticks.Add(1)
								case <-w.wake: // Stop and Trigger
								case <-stop:
									return
								}
							}
						}()
					}
					stopAll = func() { runtime.KeepAlive(ws) }
				}
				time.Sleep(period + 100*time.Millisecond) // every worker on its grid
				perWorker := float64(memInUse()-before) / scaleWorkers
				t0, c0 := ticks.Load(), cpuTime()
				time.Sleep(window)
				t1, c1 := ticks.Load(), cpuTime()
				stopAll()
				close(stop)
				wg.Wait()
				b.ReportMetric(float64(c1-c0)/float64(t1-t0), "cpu-ns/tick")
				b.ReportMetric(float64(c1-c0)/window.Seconds()/1e6, "cpu-ms/s")
				b.ReportMetric(perWorker, "B/worker")
			}
		})
	}
}

// BenchmarkSeries50k: each worker's prober_probe_total and
// prober_probe_duration_seconds series, as the hand-rolled series in
// metrics_series.go or as client_golang CounterVec and HistogramVec
// children (with the same labels and buckets). Reports memory per worker
// and the cost of counting one result.
func BenchmarkSeries50k(b *testing.B) {
	for _, impl := range []string{"series", "client_golang"} {
		b.Run(impl, func(b *testing.B) {
			before := memInUse()
			var observe func(i int)
			var keep any
			switch impl {
			case "series":
				m := NewMetrics(prometheus.NewRegistry())
				ss := make([]series, scaleWorkers)
				for i := range ss {
					ss[i] = newSeries(probespec.Readiness, "app", fmt.Sprintf("pod-%d", i), "ns", fmt.Sprintf("uid-%d", i))
					m.observeProbe(&ss[i], results.Success, 0.001)
				}
				observe = func(i int) { m.observeProbe(&ss[i%scaleWorkers], results.Success, 0.002) }
				keep = ss
			default:
				reg := prometheus.NewRegistry()
				total := prometheus.NewCounterVec(prometheus.CounterOpts{Name: "prober_probe_total", Help: "h"},
					[]string{"probe_type", "container", "pod", "namespace", "pod_uid", "result"})
				dur := prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "prober_probe_duration_seconds", Help: "h"},
					[]string{"probe_type", "container", "pod", "namespace"})
				reg.MustRegister(total, dur)
				type child struct {
					c prometheus.Counter
					o prometheus.Observer
				}
				cs := make([]child, scaleWorkers)
				for i := range cs {
					pod := fmt.Sprintf("pod-%d", i)
					cs[i] = child{total.WithLabelValues("Readiness", "app", pod, "ns", fmt.Sprintf("uid-%d", i), "successful"),
						dur.WithLabelValues("Readiness", "app", pod, "ns")}
					cs[i].c.Inc()
					cs[i].o.Observe(0.001)
				}
				observe = func(i int) { c := &cs[i%scaleWorkers]; c.c.Inc(); c.o.Observe(0.002) }
				keep = reg
			}
			perWorker := float64(memInUse()-before) / scaleWorkers
			i := 0
			for b.Loop() {
				observe(i)
				i++
			}
			b.ReportMetric(perWorker, "B/worker")
			runtime.KeepAlive(keep)
		})
	}
}

// memInUse is the live heap and the goroutine stacks, after a collection.
func memInUse() int64 {
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return int64(ms.HeapAlloc + ms.StackInuse)
}

// cpuTime is the process's user and system CPU time in nanoseconds.
func cpuTime() int64 {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return ru.Utime.Nano() + ru.Stime.Nano()
}
