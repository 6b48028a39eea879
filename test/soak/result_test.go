//go:build soak

package soak

import (
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// result is the JSON summary written to SOAK_OUT.
type result struct {
	Config                      config          `json:"config"`
	ProbedFlags                 []string        `json:"probedFlags"`
	LoadStart                   string          `json:"loadAverageStart"`
	LoadEnd                     string          `json:"loadAverageEnd"`
	MeanLoad1                   float64         `json:"meanLoad1DuringChurn"`
	RampSeconds                 float64         `json:"rampSeconds"`
	Waves                       int             `json:"waves"`
	PodsCreated                 int             `json:"podsCreated"`
	PodsDeleted                 int             `json:"podsDeleted"`
	Flips                       int             `json:"readinessFlips"`
	StatusWrites                map[string]int  `json:"statusWrites"`
	LivePodsChecked             int             `json:"livePodsChecked"`
	Mismatches                  []string        `json:"mismatches"`
	ConvergeSeconds             float64         `json:"finalConvergeSeconds"`
	Baseline                    snapshot        `json:"baseline"`
	Final                       snapshot        `json:"final"`
	Delta                       map[string]int  `json:"deltaFromBaseline"`
	RSSSlopeKiBPerMin           float64         `json:"rssSlopeKiBPerMin"`
	SlopeWindowMinutes          float64         `json:"slopeWindowMinutes"`
	SlopeAsserted               bool            `json:"slopeAsserted"`
	MeanWorkers                 float64         `json:"meanWorkers"`
	CPUMillicoresPer1000Workers float64         `json:"cpuMillicoresPer1000Workers"`
	RSSMiBPer1000Workers        float64         `json:"rssMiBPer1000WorkersAboveBaseline"`
	HeapMiBPer1000Workers       float64         `json:"heapMiBPer1000Workers"`
	PeakRSSMiB                  float64         `json:"peakRSSMiB"`
	MeanRSSMiB                  float64         `json:"meanRSSMiBAfterWarmup"`
	ProcSamples                 []procSample    `json:"procSamples"`
	MetricsSamples              []metricsSample `json:"metricsSamples"`
}

// analyze derives the figures from the samples between warm-up and the end
// of churn.
func (r *result) analyze(s *sampler, warmupEnd, churnEnd, start time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	r.ProcSamples, r.MetricsSamples = s.proc, s.mets
	r.Delta = map[string]int{
		"workers":    r.Final.Metrics.Workers - r.Baseline.Metrics.Workers,
		"goroutines": r.Final.Metrics.Goroutines - r.Baseline.Metrics.Goroutines,
		"fds":        r.Final.Proc.FDs - r.Baseline.Proc.FDs,
		"series":     r.Final.Metrics.Series - r.Baseline.Metrics.Series,
		"podSeries":  r.Final.Metrics.PodSeries - r.Baseline.Metrics.PodSeries,
	}
	from, to := warmupEnd.Sub(start).Seconds(), churnEnd.Sub(start).Seconds()
	var xs, rss []float64
	var first, last *procSample
	for i, p := range s.proc {
		r.PeakRSSMiB = math.Max(r.PeakRSSMiB, float64(p.RSSKiB)/1024)
		if p.Elapsed < from || p.Elapsed > to {
			continue
		}
		if first == nil {
			first = &s.proc[i]
		}
		last = &s.proc[i]
		xs = append(xs, p.Elapsed/60)
		rss = append(rss, float64(p.RSSKiB))
	}
	var workers, heap, load []float64
	for i, m := range s.mets {
		if m.Elapsed >= from && m.Elapsed <= to {
			workers = append(workers, float64(m.Workers))
			heap = append(heap, float64(m.HeapInuse))
			load = append(load, s.load[i])
		}
	}
	if len(xs) < 2 || len(workers) == 0 {
		return
	}
	r.RSSSlopeKiBPerMin = slope(xs, rss)
	r.SlopeWindowMinutes = xs[len(xs)-1] - xs[0]
	r.SlopeAsserted = r.SlopeWindowMinutes >= r.Config.MinSlopeWindow.Minutes()
	r.MeanWorkers = mean(workers)
	r.MeanLoad1 = mean(load)
	k := r.MeanWorkers / 1000
	cores := float64(last.CPUTicks-first.CPUTicks) / clockTicks / last.At.Sub(first.At).Seconds()
	r.CPUMillicoresPer1000Workers = cores * 1000 / k
	r.MeanRSSMiB = mean(rss) / 1024
	r.RSSMiBPer1000Workers = (r.MeanRSSMiB - float64(r.Baseline.Proc.RSSKiB)/1024) / k
	r.HeapMiBPer1000Workers = (mean(heap) - float64(r.Baseline.Metrics.HeapInuse)) / (1 << 20) / k
}

// clockTicks is USER_HZ, the unit of /proc/<pid>/stat's times (100 on Linux).
const clockTicks = 100

func writeResult(t *testing.T, path string, r *result) {
	t.Helper()
	b, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
	abs, _ := filepath.Abs(path)
	t.Logf("summary written to %s", abs)
}
