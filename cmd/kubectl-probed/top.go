package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"sort"
	"sync"
	"time"

	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/cli-runtime/pkg/genericclioptions"

	"github.com/probed-dev/probed/pkg/probedclient"
	"github.com/probed-dev/probed/pkg/probeview"
)

// topOptions are top's flags.
type topOptions struct {
	node        string
	interval    time.Duration
	concurrency int
	maxRows     int
	print       *genericclioptions.PrintFlags
}

func newTop(o *options) *cobra.Command {
	t := topOptions{print: printFlags()}
	cmd := &cobra.Command{
		Use:   "top [--node NODE]",
		Short: "A node's probes and their cost: duration p99, failures, executions per minute",
		Long: `List the probes of a node (or of every node that runs probed) with what they
cost: duration p99 and mean, failures, and executions per minute, measured by
scraping probed's /metrics twice, --interval apart. The costliest (executions
per minute × mean duration) come first, at most --max-rows of them.

Nodes are scraped --concurrency at a time, each through a port-forward opened
for the scrape and closed after it. A node whose probed cannot be reached is
named on stderr and left out; the others are shown.

It needs the ClusterRole probed-metrics-reader.`,
		Example: `  kubectl probed top --node worker-3
  kubectl probed top --interval 30s --max-rows 20
  kubectl probed top -o json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			switch {
			case t.interval <= 0:
				return fmt.Errorf("--interval must be positive")
			case t.concurrency < 1:
				return fmt.Errorf("--concurrency must be at least 1")
			case t.maxRows < 0:
				return fmt.Errorf("--max-rows must be 0 (all) or more")
			}
			if *t.print.OutputFormat != "" {
				if _, err := t.print.ToPrinter(); err != nil {
					return err
				}
			}
			return o.top(cmd.Context(), t)
		},
	}
	cmd.Flags().StringVar(&t.node, "node", "", "the node (default: every node that runs probed)")
	cmd.Flags().DurationVar(&t.interval, "interval", 10*time.Second, "time between the two scrapes that executions per minute are measured over")
	cmd.Flags().IntVar(&t.concurrency, "concurrency", 10, "nodes scraped at once (each through its own port-forward)")
	cmd.Flags().IntVar(&t.maxRows, "max-rows", 50, "show at most this many probes, the costliest; 0 shows all")
	t.print.AddFlags(cmd)
	return cmd
}

// scrapeFunc fetches one node's probed /metrics.
type scrapeFunc func(ctx context.Context, node string) ([]byte, error)

func (o *options) top(ctx context.Context, t topOptions) error {
	cfg, client, err := o.clients()
	if err != nil {
		return err
	}
	loc := o.locator(client)
	nodes := []string{t.node}
	if t.node == "" {
		if nodes, err = loc.Nodes(ctx); err != nil {
			return err
		}
		if len(nodes) == 0 {
			return fmt.Errorf("no running probed pod (namespace %s, selector %s)", loc.Namespace, loc.Selector)
		}
	}
	// One token for every node's scrapes.
	po := o.probedOptions(client)
	scrape := func(ctx context.Context, node string) ([]byte, error) {
		pp, err := loc.Pod(ctx, node)
		if err != nil {
			return nil, err
		}
		s, err := probedclient.Open(ctx, client, cfg, pp, po)
		if err != nil {
			return nil, err
		}
		defer s.Close()
		return s.Get(ctx, "/metrics", "")
	}
	wait := func(ctx context.Context, d time.Duration) error {
		select {
		case <-time.After(d):
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return runTop(ctx, t, nodes, scrape, o.clock.Now, wait, o.streams.Out, o.streams.ErrOut)
}

// nodeScrape is one node's scrape, or why it failed.
type nodeScrape struct {
	scrape probeview.Scrape
	err    error
}

// scrapeAll scrapes every node, at most concurrency at once.
func scrapeAll(ctx context.Context, nodes []string, concurrency int, scrape scrapeFunc, now func() time.Time) map[string]nodeScrape {
	out := make(map[string]nodeScrape, len(nodes))
	var mu sync.Mutex
	var wg sync.WaitGroup
	slots := make(chan struct{}, concurrency)
	for _, n := range nodes {
		wg.Add(1)
		slots <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-slots }()
			var r nodeScrape
			body, err := scrape(ctx, n)
			if err == nil {
				r.scrape, err = probeview.ParseScrape(bytes.NewReader(body), now())
			}
			r.err = err
			mu.Lock()
			out[n] = r
			mu.Unlock()
		}()
	}
	wg.Wait()
	return out
}

// topRow is one probe of the output.
type topRow struct {
	Node string `json:"node"`
	probeview.Cost
}

// topResult is what top found: the rows shown, how many more there were,
// and the nodes it could not scrape.
type topResult struct {
	Interval    string       `json:"interval"`
	Probes      []jsonCost   `json:"probes"`
	NotShown    int          `json:"notShown"`
	FailedNodes []failedNode `json:"failedNodes"`
}

type jsonCost struct {
	Node           string   `json:"node"`
	Namespace      string   `json:"namespace"`
	Pod            string   `json:"pod"`
	Container      string   `json:"container"`
	ProbeType      string   `json:"probeType"`
	P99Seconds     *float64 `json:"p99Seconds"`
	MeanSeconds    *float64 `json:"meanSeconds"`
	Failures       float64  `json:"failures"`
	ExecsPerMinute float64  `json:"executionsPerMinute"`
}

type failedNode struct {
	Node  string `json:"node"`
	Error string `json:"error"`
}

// runTop scrapes every node twice, interval apart, and prints the costliest
// probes. A node that fails either scrape is reported and left out; top
// fails only when no node could be scraped.
func runTop(ctx context.Context, t topOptions, nodes []string, scrape scrapeFunc, now func() time.Time,
	wait func(context.Context, time.Duration) error, out, errOut io.Writer) error {
	before := scrapeAll(ctx, nodes, t.concurrency, scrape, now)
	if err := wait(ctx, t.interval); err != nil {
		return err
	}
	var ok []string
	for _, n := range nodes {
		if before[n].err == nil {
			ok = append(ok, n)
		}
	}
	after := scrapeAll(ctx, ok, t.concurrency, scrape, now)
	var rows []topRow
	var failed []failedNode
	for _, n := range nodes {
		err := before[n].err
		if err == nil {
			err = after[n].err
		}
		var costs []probeview.Cost
		if err == nil {
			costs, err = probeview.Costs(before[n].scrape, after[n].scrape)
		}
		if err != nil {
			failed = append(failed, failedNode{Node: n, Error: err.Error()})
			continue
		}
		for _, c := range costs {
			rows = append(rows, topRow{Node: n, Cost: c})
		}
	}
	sort.SliceStable(rows, func(i, j int) bool {
		return rows[i].PerMinute*rows[i].Mean.Seconds() > rows[j].PerMinute*rows[j].Mean.Seconds()
	})
	notShown := 0
	if t.maxRows > 0 && len(rows) > t.maxRows {
		notShown = len(rows) - t.maxRows
		rows = rows[:t.maxRows]
	}
	for _, f := range failed {
		fmt.Fprintf(errOut, "warning: node %s left out: %s\n", f.Node, f.Error)
	}
	if len(failed) == len(nodes) {
		return fmt.Errorf("no probed could be scraped (%d nodes)", len(nodes))
	}
	if *t.print.OutputFormat != "" {
		return printTopObject(t, rows, notShown, failed, out)
	}
	var groups []probeview.NodeCosts
	for _, r := range rows {
		if len(groups) == 0 || groups[len(groups)-1].Node != r.Node {
			groups = append(groups, probeview.NodeCosts{Node: r.Node})
		}
		g := &groups[len(groups)-1]
		g.Costs = append(g.Costs, r.Cost)
	}
	if err := probeview.Top(out, groups, t.interval); err != nil {
		return err
	}
	if notShown > 0 {
		fmt.Fprintf(out, "(%d more probes not shown: --max-rows=0 shows all)\n", notShown)
	}
	if len(failed) > 0 {
		fmt.Fprintf(out, "(%d of %d nodes left out: see the warnings)\n", len(failed), len(nodes))
	}
	return nil
}

func printTopObject(t topOptions, rows []topRow, notShown int, failed []failedNode, out io.Writer) error {
	res := topResult{Interval: t.interval.String(), Probes: []jsonCost{}, NotShown: notShown, FailedNodes: failed}
	if res.FailedNodes == nil {
		res.FailedNodes = []failedNode{}
	}
	for _, r := range rows {
		jc := jsonCost{Node: r.Node, Namespace: r.Namespace, Pod: r.Pod, Container: r.Container, ProbeType: r.ProbeType,
			Failures: r.Failures, ExecsPerMinute: r.PerMinute}
		if r.HasP99 {
			p99, mean := r.P99.Seconds(), r.Mean.Seconds()
			jc.P99Seconds, jc.MeanSeconds = &p99, &mean
		}
		res.Probes = append(res.Probes, jc)
	}
	return printObject(t.print, res, out)
}

// printFlags are kubectl's -o flags (cli-runtime): json, yaml, jsonpath and
// go-template; empty prints the table.
func printFlags() *genericclioptions.PrintFlags {
	none := ""
	return &genericclioptions.PrintFlags{
		JSONYamlPrintFlags:   genericclioptions.NewJSONYamlPrintFlags(),
		TemplatePrinterFlags: genericclioptions.NewKubeTemplatePrintFlags(),
		OutputFormat:         &none,
	}
}

// printObject prints v, encoded as JSON, with the printer -o asks for.
func printObject(pf *genericclioptions.PrintFlags, v any, out io.Writer) error {
	p, err := pf.ToPrinter()
	if err != nil {
		return err
	}
	raw, err := json.Marshal(v)
	if err != nil {
		return err
	}
	return p.PrintObj(&runtime.Unknown{Raw: raw, ContentType: runtime.ContentTypeJSON}, out)
}
