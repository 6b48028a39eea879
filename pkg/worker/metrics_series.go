package worker

import (
	"math"
	"sort"
	"sync"
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/probed-dev/probed/pkg/probespec"
	"github.com/probed-dev/probed/pkg/results"
)

// series is one worker's per-pod metrics: its label values, fixed when the
// worker is created (probe_type, container, pod, namespace, pod_uid), and
// its counts, which only the worker's goroutine adds to and a scrape reads.
// It is exposed through seriesSet once the worker counts its first result.
type series struct {
	lv [5]string
	// total counts results by index (unknown, success, failure).
	total [3]atomic.Uint64
	// dur is the duration histogram: per-bucket (not cumulative) counts,
	// the last slot for values above every bound, and the sum's bits. The
	// count is the buckets' sum, so a scrape never sees them disagree.
	dur    [len(prometheusDefBuckets) + 1]atomic.Uint64
	durSum atomic.Uint64
	// listed is whether seriesSet holds it; the worker's goroutine only.
	listed bool
}

// prometheusDefBuckets are prober_probe_duration_seconds' bounds: the
// kubelet sets none, so gets the client's defaults. An array sizes
// series.dur at compile time; TestDurationBucketsAreTheClientDefaults
// checks it still matches the client.
var prometheusDefBuckets = [...]float64{.005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10}

func newSeries(t probespec.ProbeType, container, pod, namespace, podUID string) series {
	return series{lv: [5]string{t.String(), container, pod, namespace, podUID}}
}

func (s *series) probeType() string { return s.lv[0] }

func (s *series) observeDuration(v float64) {
	s.dur[sort.SearchFloat64s(prometheusDefBuckets[:], v)].Add(1)
	for {
		old := s.durSum.Load()
		if s.durSum.CompareAndSwap(old, math.Float64bits(math.Float64frombits(old)+v)) {
			return
		}
	}
}

// seriesSet exposes the live workers' series as prober_probe_total and
// prober_probe_duration_seconds, building the samples at scrape time.
// Series with the same labels are summed: the histogram has no pod_uid, so a
// pod and its same-named successor share one, and without pod_uid so do the
// counters.
//
// With DurationPerNamespace the histogram is one per namespace and probe
// type; retired keeps the observations of the workers that ended there, so
// that it never falls while it is exposed, and goes with the key's last
// worker.
type seriesSet struct {
	totalDesc, durDesc *prometheus.Desc
	podUID             bool
	durMode            DurationSeries

	mu      sync.Mutex
	live    map[*series]struct{}
	retired map[durKey]*retiredDur
}

// retiredDur is one namespace histogram's ended workers: their summed
// observations, and how many of its workers are still listed.
type retiredDur struct {
	durAgg
	live int
}

// durKey is the series' duration labels: probe_type, container, pod,
// namespace, with container and pod empty when folded per namespace.
func (s *seriesSet) durKey(ws *series) durKey {
	if s.durMode == DurationPerNamespace {
		return durKey{ws.lv[0], "", "", ws.lv[3]}
	}
	return durKey(ws.lv[:4])
}

func (m *Metrics) listSeries(s *series) {
	set := &m.perPod
	set.mu.Lock()
	set.live[s] = struct{}{}
	if set.durMode == DurationPerNamespace {
		k := set.durKey(s)
		r := set.retired[k]
		if r == nil {
			r = &retiredDur{}
			set.retired[k] = r
		}
		r.live++
	}
	set.mu.Unlock()
	s.listed = true
}

// observeProbe counts a result and, as the kubelet, times only successful and
// unknown ones.
func (m *Metrics) observeProbe(s *series, r results.Result, seconds float64) {
	if m == nil {
		return
	}
	i := int(r - results.Unknown)
	if i < 0 || i >= len(s.total) {
		return
	}
	if !s.listed {
		m.listSeries(s)
	}
	s.total[i].Add(1)
	if r != results.Failure && m.perPod.durMode != DurationNone {
		s.observeDuration(seconds)
	}
}

// deleteSeries drops the worker's per-pod series and zeroes them, so a
// later result starts them afresh.
func (m *Metrics) deleteSeries(s *series) {
	if m == nil || !s.listed {
		return
	}
	set := &m.perPod
	set.mu.Lock()
	delete(set.live, s)
	if set.durMode == DurationPerNamespace {
		// Under the same lock as the delete, so no scrape sees the
		// namespace's histogram without this worker's observations.
		k := set.durKey(s)
		if r := set.retired[k]; r != nil {
			if r.live--; r.live <= 0 {
				delete(set.retired, k)
			} else {
				for i := range r.buckets {
					r.buckets[i] += s.dur[i].Load()
				}
				r.sum += math.Float64frombits(s.durSum.Load())
			}
		}
	}
	set.mu.Unlock()
	s.listed = false
	for i := range s.total {
		s.total[i].Store(0)
	}
	for i := range s.dur {
		s.dur[i].Store(0)
	}
	s.durSum.Store(0)
}

type totalKey [5]string // pod_uid empty without the label

type durKey [4]string

type durAgg struct {
	buckets [len(prometheusDefBuckets) + 1]uint64
	sum     float64
}

// familyCollector is one of the two families of a seriesSet, so that each
// can be registered, gathered and counted on its own.
type familyCollector struct {
	set   *seriesSet
	total bool
}

func (f familyCollector) Describe(ch chan<- *prometheus.Desc) {
	if f.total {
		ch <- f.set.totalDesc
	} else {
		ch <- f.set.durDesc
	}
}

func (f familyCollector) Collect(ch chan<- prometheus.Metric) {
	if f.total {
		f.set.collectTotals(ch)
	} else {
		f.set.collectDurations(ch)
	}
}

// resultLabels are prober_probe_total's result values by series.total index.
var resultLabels = [3]string{results.Unknown.MetricLabel(), results.Success.MetricLabel(), results.Failure.MetricLabel()}

func (s *seriesSet) collectTotals(ch chan<- prometheus.Metric) {
	s.mu.Lock()
	sums := make(map[totalKey][3]uint64, len(s.live))
	for ws := range s.live {
		k := totalKey(ws.lv)
		if !s.podUID {
			k[4] = ""
		}
		c := sums[k]
		for i := range c {
			c[i] += ws.total[i].Load()
		}
		sums[k] = c
	}
	s.mu.Unlock()
	for k, c := range sums {
		for i, n := range c {
			if n == 0 {
				continue // a result never seen has no series, as with a CounterVec
			}
			var lv []string
			if s.podUID {
				lv = []string{k[0], k[1], k[2], k[3], k[4], resultLabels[i]}
			} else {
				lv = []string{k[0], k[1], k[2], k[3], resultLabels[i]}
			}
			ch <- prometheus.MustNewConstMetric(s.totalDesc, prometheus.CounterValue, float64(n), lv...)
		}
	}
}

func (s *seriesSet) collectDurations(ch chan<- prometheus.Metric) {
	s.mu.Lock()
	aggs := make(map[durKey]*durAgg)
	for ws := range s.live {
		k := s.durKey(ws)
		a := aggs[k]
		if a == nil {
			a = &durAgg{}
			aggs[k] = a
		}
		for i := range a.buckets {
			a.buckets[i] += ws.dur[i].Load()
		}
		a.sum += math.Float64frombits(ws.durSum.Load())
	}
	for k, r := range s.retired {
		if a := aggs[k]; a != nil {
			for i := range a.buckets {
				a.buckets[i] += r.buckets[i]
			}
			a.sum += r.sum
		}
	}
	s.mu.Unlock()
	for k, a := range aggs {
		var count uint64
		cumulative := make(map[float64]uint64, len(prometheusDefBuckets))
		for i, n := range a.buckets {
			count += n
			if i < len(prometheusDefBuckets) {
				cumulative[prometheusDefBuckets[i]] = count
			}
		}
		if count == 0 {
			continue // only failures so far: no series, as with a HistogramVec
		}
		if s.durMode == DurationPerNamespace {
			ch <- prometheus.MustNewConstHistogram(s.durDesc, count, a.sum, cumulative, k[0], k[3])
			continue
		}
		ch <- prometheus.MustNewConstHistogram(s.durDesc, count, a.sum, cumulative, k[0], k[1], k[2], k[3])
	}
}
