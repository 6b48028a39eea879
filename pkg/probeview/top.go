package probeview

import (
	"fmt"
	"io"
	"math"
	"strconv"
	"text/tabwriter"
	"time"
)

// NodeCosts is one node's probes and their costs.
type NodeCosts struct {
	Node  string
	Costs []Cost
}

// Top writes one row per probe: its node, pod, container, probe type,
// duration p99 and mean, failures since probed started, and executions per
// minute over the interval, in the order given.
func Top(w io.Writer, nodes []NodeCosts, interval time.Duration) error {
	tw := tabwriter.NewWriter(w, 0, 8, 2, ' ', 0)
	fmt.Fprintln(tw, "NODE\tNAMESPACE\tPOD\tCONTAINER\tPROBE\tP99\tMEAN\tFAILED\tEXECS/MIN")
	for _, n := range nodes {
		for _, c := range n.Costs {
			p99, mean := "-", "-"
			if c.HasP99 {
				p99, mean = roundDuration(c.P99), roundDuration(c.Mean)
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", printable(n.Node), printable(c.Namespace), printable(c.Pod),
				printable(c.Container), printable(c.ProbeType), p99, mean, strconv.FormatFloat(c.Failures, 'f', 0, 64), perMinute(c.PerMinute))
		}
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	_, err := fmt.Fprintf(w, "(P99, MEAN and FAILED since probed started; P99 and MEAN of successful and unknown results only, as the kubelet's metric; EXECS/MIN over the last %v)\n", interval)
	return err
}

// roundDuration keeps three significant figures: 1.23ms, 12.3ms, 499ms,
// 1.2s (trailing zeros dropped).
func roundDuration(d time.Duration) string {
	for _, unit := range []time.Duration{time.Second, time.Millisecond, time.Microsecond} {
		if d >= unit {
			v := float64(d) / float64(unit)
			scale := math.Pow10(2 - digits(v))
			return strconv.FormatFloat(math.Round(v*scale)/scale, 'f', -1, 64) + unitName(unit)
		}
	}
	return d.String()
}

func digits(v float64) int {
	n := 0
	for v >= 10 {
		v /= 10
		n++
	}
	return n
}

func unitName(u time.Duration) string {
	switch u {
	case time.Second:
		return "s"
	case time.Millisecond:
		return "ms"
	}
	return "µs"
}

func perMinute(v float64) string {
	return strconv.FormatFloat(v, 'f', 1, 64)
}
