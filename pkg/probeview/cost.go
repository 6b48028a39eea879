package probeview

import (
	"cmp"
	"fmt"
	"io"
	"math"
	"slices"
	"sort"
	"strings"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// The metrics top reads; their labels are the kubelet's.
const (
	probeTotal    = "prober_probe_total"
	probeDuration = "prober_probe_duration_seconds"
)

// ProbeKey names one probe worker on a node.
type ProbeKey struct {
	Namespace, Pod, Container, ProbeType string
}

// Scrape is one parsed /metrics response and when it was taken.
type Scrape struct {
	At       time.Time
	Families map[string]*dto.MetricFamily
}

// ParseScrape parses a /metrics body in the Prometheus text format.
func ParseScrape(r io.Reader, at time.Time) (Scrape, error) {
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(r)
	if err != nil {
		return Scrape{}, fmt.Errorf("parsing /metrics: %w", err)
	}
	return Scrape{At: at, Families: fams}, nil
}

// Cost is one probe's cost on its node.
type Cost struct {
	ProbeKey
	// P99 is the 99th percentile of the probe's duration since probed
	// started, from its histogram; HasP99 is false before any observation
	// (probed, as the kubelet, observes only successful and unknown results).
	P99    time.Duration
	HasP99 bool
	// Mean is the histogram's average duration.
	Mean time.Duration
	// Failures counts failed results since probed started.
	Failures float64
	// PerMinute is how many results the probe gave per minute between the
	// two scrapes: its executions per minute.
	PerMinute float64
}

// Costs computes every probe's cost from two scrapes of the same probed, an
// interval apart. A counter that went down between them (probed restarted)
// counts from zero, as Prometheus' rate() does.
func Costs(before, after Scrape) ([]Cost, error) {
	dt := after.At.Sub(before.At)
	if dt <= 0 {
		return nil, fmt.Errorf("scrapes are %v apart: the second must come after the first", dt)
	}
	costs := map[ProbeKey]*Cost{}
	get := func(k ProbeKey) *Cost {
		c, ok := costs[k]
		if !ok {
			c = &Cost{ProbeKey: k}
			costs[k] = c
		}
		return c
	}
	prev := counterValues(before.Families[probeTotal])
	for _, m := range after.Families[probeTotal].GetMetric() {
		k, result := keyOf(m), label(m, "result")
		v := m.GetCounter().GetValue()
		c := get(k)
		if result == "failed" {
			c.Failures += v
		}
		inc := v
		if p, ok := prev[seriesID(m)]; ok && p <= v {
			inc = v - p
		}
		c.PerMinute += inc / dt.Minutes()
	}
	for _, m := range after.Families[probeDuration].GetMetric() {
		k := keyOf(m)
		if k.Pod == "" {
			// A namespace's histogram (--metrics-probe-duration=namespace)
			// is no one probe's: its probes show no P99 or mean.
			continue
		}
		c := get(k)
		h := m.GetHistogram()
		if q, ok := quantile(0.99, h); ok {
			c.P99, c.HasP99 = seconds(q), true
		}
		if n := h.GetSampleCount(); n > 0 {
			c.Mean = seconds(h.GetSampleSum() / float64(n))
		}
	}
	out := make([]Cost, 0, len(costs))
	for _, c := range costs {
		out = append(out, *c)
	}
	SortByCost(out)
	return out, nil
}

// SortByCost orders probes by the time they keep busy per minute (executions
// per minute × mean duration), highest first, then by name.
func SortByCost(cs []Cost) {
	slices.SortFunc(cs, func(a, b Cost) int {
		if c := cmp.Compare(b.busy(), a.busy()); c != 0 {
			return c
		}
		return cmp.Or(cmp.Compare(a.Namespace, b.Namespace), cmp.Compare(a.Pod, b.Pod),
			cmp.Compare(a.Container, b.Container), cmp.Compare(a.ProbeType, b.ProbeType))
	})
}

func (c Cost) busy() float64 { return c.PerMinute * c.Mean.Seconds() }

// quantile is the q-quantile of a cumulative histogram, interpolated
// linearly inside the bucket that holds it (the first bucket starts at 0).
// A quantile that falls in the +Inf bucket is the highest finite bound.
func quantile(q float64, h *dto.Histogram) (float64, bool) {
	buckets := slices.Clone(h.GetBucket())
	sort.Slice(buckets, func(i, j int) bool { return buckets[i].GetUpperBound() < buckets[j].GetUpperBound() })
	total := float64(h.GetSampleCount())
	if total == 0 {
		return 0, false
	}
	rank := q * total
	lower, below := 0.0, 0.0
	for _, b := range buckets {
		upper, count := b.GetUpperBound(), float64(b.GetCumulativeCount())
		if count >= rank {
			if math.IsInf(upper, +1) {
				return lower, true
			}
			if count == below {
				return upper, true
			}
			return lower + (upper-lower)*(rank-below)/(count-below), true
		}
		lower, below = upper, count
	}
	// The text format always has +Inf; without it the quantile is past the
	// last finite bound.
	return lower, true
}

func seconds(s float64) time.Duration { return time.Duration(s * float64(time.Second)) }

func keyOf(m *dto.Metric) ProbeKey {
	return ProbeKey{Namespace: label(m, "namespace"), Pod: label(m, "pod"), Container: label(m, "container"), ProbeType: label(m, "probe_type")}
}

func label(m *dto.Metric, name string) string {
	for _, l := range m.GetLabel() {
		if l.GetName() == name {
			return l.GetValue()
		}
	}
	return ""
}

// seriesID identifies a series by all its labels (pod_uid included, so a
// recreated pod of the same name is a new series).
func seriesID(m *dto.Metric) string {
	pairs := make([]string, 0, len(m.GetLabel()))
	for _, l := range m.GetLabel() {
		pairs = append(pairs, l.GetName()+"="+l.GetValue())
	}
	slices.Sort(pairs)
	return strings.Join(pairs, "\x00")
}

func counterValues(f *dto.MetricFamily) map[string]float64 {
	out := map[string]float64{}
	for _, m := range f.GetMetric() {
		out[seriesID(m)] = m.GetCounter().GetValue()
	}
	return out
}
