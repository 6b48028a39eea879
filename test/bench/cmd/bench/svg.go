package main

import (
	"fmt"
	"html"
	"math"
	"strconv"
	"strings"
)

// Hand-written SVG charts: grouped bars with min–max whiskers, and lines on
// a log scale with reference lines. No dependencies.

const (
	chartW, chartH                     = 760, 420
	marginL, marginR, marginT, marginB = 78, 190, 48, 56
	colorProbed, colorKubelet          = "#1f77b4", "#d62728"
)

type barSeries struct {
	name  string
	color string
	vals  []*Agg // one per category
}

type lineSeries struct {
	name  string
	color string
	dash  string
	vals  []*Agg
}

type refLine struct {
	y     float64
	label string
}

// charts returns the SVG files for res, by file name.
func charts(res *Results) map[string]string {
	out := map[string]string{}
	find := func(figPrefix, metric string) *Row {
		for i := range res.Rows {
			r := &res.Rows[i]
			if strings.HasPrefix(r.Figure, figPrefix) && r.Metric == metric {
				return r
			}
		}
		return nil
	}
	protos := []string{"HTTP", "TCP", "gRPC"}
	bars := func(file, title, unit, fig string, logY bool) {
		var p, k []*Agg
		var cats []string
		for _, m := range protos {
			r := find(fig, m)
			if r == nil {
				continue
			}
			cats = append(cats, m+ratioLabel(r.Ratio))
			p, k = append(p, r.Probed), append(k, r.Kubelet)
		}
		if len(cats) > 0 {
			out[file] = barChart(title, unit, cats, []barSeries{{"probed", colorProbed, p}, {"kubelet v1.37.2", colorKubelet, k}}, logY)
		}
	}
	bars("cpu_per_probe.svg", "CPU per probe at saturation, one core (median, min–max)", "µs of CPU per probe", "1.", false)
	bars("allocs_per_probe.svg", "Allocations per probe (median, min–max)", "allocations per probe", "3. Allocations", false)

	// Scheduling.
	var ns []string
	var p99p, p99k, maxp, maxk, cpup, cpuk, memp, memk []*Agg
	for _, r := range res.Rows {
		if !strings.HasPrefix(r.Figure, "7.") {
			continue
		}
		n := strings.TrimPrefix(strings.Fields(r.Figure)[2], "")
		switch r.Metric {
		case "lateness p99":
			ns = append(ns, n)
			p99p, p99k = append(p99p, r.Probed), append(p99k, r.Kubelet)
		case "lateness max":
			maxp, maxk = append(maxp, r.Probed), append(maxk, r.Kubelet)
		case "process CPU per second, idle":
			cpup, cpuk = append(cpup, r.Probed), append(cpuk, r.Kubelet)
		case "memory per idle worker (live heap + stacks)":
			memp, memk = append(memp, r.Probed), append(memk, r.Kubelet)
		}
	}
	if len(ns) > 0 {
		cats := make([]string, len(ns))
		for i, n := range ns {
			cats[i] = n + " workers"
		}
		out["lateness_vs_workers.svg"] = lineChart("Schedule lateness vs workers, period 1 s (median of runs, min–max)", "lateness (ms, log scale)", cats,
			[]lineSeries{
				{"probed p99", colorProbed, "", p99p},
				{"probed max", colorProbed, "6,4", maxp},
				{"kubelet p99", colorKubelet, "", p99k},
				{"kubelet max", colorKubelet, "6,4", maxk},
			}, []refLine{{1.5, "target p99 1.5 ms"}, {5, "target max 5 ms"}})
		out["sched_cpu.svg"] = barChart("Idle process CPU vs workers (median, min–max)", "CPU ms per second", cats,
			[]barSeries{{"probed", colorProbed, cpup}, {"kubelet design", colorKubelet, cpuk}}, false)
		out["sched_memory.svg"] = barChart("Memory per idle worker: live heap + stacks (median, min–max)", "bytes per worker", cats,
			[]barSeries{{"probed", colorProbed, memp}, {"kubelet design", colorKubelet, memk}}, false)
	}
	return out
}

func ratioLabel(a *Agg) string {
	if a == nil {
		return ""
	}
	return fmt.Sprintf(" (%.2f×)", a.Median)
}

type svgDoc struct{ b strings.Builder }

func (s *svgDoc) f(format string, a ...any) { fmt.Fprintf(&s.b, format, a...) }

func newDoc(title string) *svgDoc {
	s := &svgDoc{}
	s.f(`<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d" font-family="sans-serif" font-size="12">`+"\n", chartW, chartH, chartW, chartH)
	s.f(`<rect width="100%%" height="100%%" fill="white"/>` + "\n")
	s.f(`<text x="%d" y="24" font-size="15" font-weight="bold">%s</text>`+"\n", marginL, html.EscapeString(title))
	return s
}

func (s *svgDoc) end() string {
	s.f("</svg>\n")
	return s.b.String()
}

func (s *svgDoc) legend(items [][3]string) { // name, color, dash
	x := chartW - marginR + 16
	for i, it := range items {
		y := marginT + 10 + i*20
		s.f(`<line x1="%d" y1="%d" x2="%d" y2="%d" stroke="%s" stroke-width="8" stroke-dasharray="%s"/>`+"\n", x, y, x+22, y, it[1], it[2])
		s.f(`<text x="%d" y="%d">%s</text>`+"\n", x+28, y+4, html.EscapeString(it[0]))
	}
}

// niceMax rounds v up to 1, 2 or 5 times a power of ten.
func niceMax(v float64) float64 {
	if v <= 0 {
		return 1
	}
	p := math.Pow(10, math.Floor(math.Log10(v)))
	for _, m := range []float64{1, 2, 5, 10} {
		if m*p >= v {
			return m * p
		}
	}
	return 10 * p
}

func fmtTick(v float64) string {
	if v >= 1 || v == 0 {
		return strconv.FormatFloat(v, 'f', -1, 64)
	}
	return strconv.FormatFloat(v, 'g', 3, 64)
}

func barChart(title, unit string, cats []string, series []barSeries, logY bool) string {
	s := newDoc(title)
	plotW, plotH := chartW-marginL-marginR, chartH-marginT-marginB
	maxV := 0.0
	for _, se := range series {
		for _, a := range se.vals {
			if a != nil {
				maxV = math.Max(maxV, a.Max)
			}
		}
	}
	top := niceMax(maxV * 1.08)
	y := func(v float64) float64 { return float64(marginT+plotH) - v/top*float64(plotH) }
	// Axes and grid.
	for i := 0; i <= 5; i++ {
		v := top * float64(i) / 5
		yy := y(v)
		s.f(`<line x1="%d" y1="%.1f" x2="%d" y2="%.1f" stroke="#ddd"/>`+"\n", marginL, yy, marginL+plotW, yy)
		s.f(`<text x="%d" y="%.1f" text-anchor="end">%s</text>`+"\n", marginL-6, yy+4, num(v))
	}
	s.f(`<text transform="translate(18,%d) rotate(-90)" text-anchor="middle">%s</text>`+"\n", marginT+plotH/2, html.EscapeString(unit))
	s.f(`<line x1="%d" y1="%d" x2="%d" y2="%d" stroke="black"/>`+"\n", marginL, marginT+plotH, marginL+plotW, marginT+plotH)
	groupW := float64(plotW) / float64(len(cats))
	barW := groupW * 0.7 / float64(len(series))
	for ci, c := range cats {
		gx := float64(marginL) + groupW*float64(ci)
		s.f(`<text x="%.1f" y="%d" text-anchor="middle">%s</text>`+"\n", gx+groupW/2, marginT+plotH+20, html.EscapeString(c))
		for si, se := range series {
			if ci >= len(se.vals) || se.vals[ci] == nil {
				continue
			}
			a := se.vals[ci]
			x := gx + groupW*0.15 + barW*float64(si)
			s.f(`<rect x="%.1f" y="%.1f" width="%.1f" height="%.1f" fill="%s"/>`+"\n", x, y(a.Median), barW-2, y(0)-y(a.Median), se.color)
			cx := x + (barW-2)/2
			if a.Max > a.Min {
				s.f(`<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="black"/>`+"\n", cx, y(a.Min), cx, y(a.Max))
				s.f(`<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="black"/>`+"\n", cx-4, y(a.Max), cx+4, y(a.Max))
				s.f(`<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="black"/>`+"\n", cx-4, y(a.Min), cx+4, y(a.Min))
			}
			s.f(`<text x="%.1f" y="%.1f" text-anchor="middle" font-size="11">%s</text>`+"\n", cx, y(a.Max)-5, num(a.Median))
		}
	}
	var items [][3]string
	for _, se := range series {
		items = append(items, [3]string{se.name, se.color, ""})
	}
	s.legend(items)
	return s.end()
}

func lineChart(title, unit string, cats []string, series []lineSeries, refs []refLine) string {
	s := newDoc(title)
	plotW, plotH := chartW-marginL-marginR, chartH-marginT-marginB
	lo, hi := math.Inf(1), math.Inf(-1)
	for _, se := range series {
		for _, a := range se.vals {
			if a != nil && a.Min > 0 {
				lo, hi = math.Min(lo, a.Min), math.Max(hi, a.Max)
			}
		}
	}
	for _, r := range refs {
		lo, hi = math.Min(lo, r.y), math.Max(hi, r.y)
	}
	if !finite(lo) || !finite(hi) {
		lo, hi = 0.01, 10
	}
	d0, d1 := math.Floor(math.Log10(lo)), math.Ceil(math.Log10(hi))
	if d1 <= d0 {
		d1 = d0 + 1
	}
	y := func(v float64) float64 {
		if v <= 0 {
			v = math.Pow(10, d0)
		}
		return float64(marginT+plotH) - (math.Log10(v)-d0)/(d1-d0)*float64(plotH)
	}
	for d := d0; d <= d1; d++ {
		v := math.Pow(10, d)
		yy := y(v)
		s.f(`<line x1="%d" y1="%.1f" x2="%d" y2="%.1f" stroke="#ddd"/>`+"\n", marginL, yy, marginL+plotW, yy)
		s.f(`<text x="%d" y="%.1f" text-anchor="end">%s</text>`+"\n", marginL-6, yy+4, fmtTick(v))
	}
	s.f(`<text transform="translate(18,%d) rotate(-90)" text-anchor="middle">%s</text>`+"\n", marginT+plotH/2, html.EscapeString(unit))
	s.f(`<line x1="%d" y1="%d" x2="%d" y2="%d" stroke="black"/>`+"\n", marginL, marginT+plotH, marginL+plotW, marginT+plotH)
	for _, r := range refs {
		s.f(`<line x1="%d" y1="%.1f" x2="%d" y2="%.1f" stroke="#2ca02c" stroke-dasharray="2,3"/>`+"\n", marginL, y(r.y), marginL+plotW, y(r.y))
		s.f(`<text x="%d" y="%.1f" fill="#2ca02c" text-anchor="end" font-size="11">%s</text>`+"\n", marginL+plotW-4, y(r.y)-4, html.EscapeString(r.label))
	}
	step := float64(plotW) / float64(len(cats))
	xAt := func(i int) float64 { return float64(marginL) + step*(float64(i)+0.5) }
	for i, c := range cats {
		s.f(`<text x="%.1f" y="%d" text-anchor="middle">%s</text>`+"\n", xAt(i), marginT+plotH+20, html.EscapeString(c))
	}
	var items [][3]string
	for si, se := range series {
		var pts []string
		off := (float64(si) - float64(len(series)-1)/2) * 6 // keep whiskers apart
		for i, a := range se.vals {
			if a == nil {
				continue
			}
			x := xAt(i) + off
			pts = append(pts, fmt.Sprintf("%.1f,%.1f", x, y(a.Median)))
			if a.Max > a.Min {
				s.f(`<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="%s" stroke-width="1"/>`+"\n", x, y(a.Min), x, y(a.Max), se.color)
			}
			s.f(`<circle cx="%.1f" cy="%.1f" r="3.5" fill="%s"/>`+"\n", x, y(a.Median), se.color)
			s.f(`<text x="%.1f" y="%.1f" font-size="10" fill="%s">%s</text>`+"\n", x+6, y(a.Median)-4, se.color, num(a.Median))
		}
		if len(pts) > 1 {
			s.f(`<polyline points="%s" fill="none" stroke="%s" stroke-width="2" stroke-dasharray="%s"/>`+"\n", strings.Join(pts, " "), se.color, se.dash)
		}
		items = append(items, [3]string{se.name, se.color, se.dash})
	}
	s.legend(items)
	return s.end()
}
