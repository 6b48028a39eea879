package main

import (
	"bytes"
	"context"
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/probed-dev/probed/pkg/probedclient"
	"github.com/probed-dev/probed/pkg/probeview"
)

func newTop(o *options) *cobra.Command {
	var node string
	var interval time.Duration
	cmd := &cobra.Command{
		Use:   "top [--node NODE]",
		Short: "A node's probes and their cost: duration p99, failures, executions per minute",
		Long: `List the probes of a node (or of every node that runs probed) with what they
cost: duration p99 and mean, failures, and executions per minute, measured by
scraping probed's /metrics twice, --interval apart. The costliest (executions
per minute × mean duration) come first.

It needs the ClusterRole probed-metrics-reader.`,
		Example: `  kubectl probed top --node worker-3
  kubectl probed top --interval 30s`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if interval <= 0 {
				return fmt.Errorf("--interval must be positive")
			}
			return o.top(cmd.Context(), node, interval)
		},
	}
	cmd.Flags().StringVar(&node, "node", "", "the node (default: every node that runs probed)")
	cmd.Flags().DurationVar(&interval, "interval", 10*time.Second, "time between the two scrapes that executions per minute are measured over")
	return cmd
}

func (o *options) top(ctx context.Context, node string, interval time.Duration) error {
	cfg, client, err := o.clients()
	if err != nil {
		return err
	}
	loc := o.locator(client)
	nodes := []string{node}
	if node == "" {
		if nodes, err = loc.Nodes(ctx); err != nil {
			return err
		}
		if len(nodes) == 0 {
			return fmt.Errorf("no running probed pod (namespace %s, selector %s)", loc.Namespace, loc.Selector)
		}
	}
	type scraped struct {
		node   string
		s      *probedclient.Session
		before probeview.Scrape
	}
	var all []scraped
	defer func() {
		for _, sc := range all {
			sc.s.Close()
		}
	}()
	for _, n := range nodes {
		pp, err := loc.Pod(ctx, n)
		if err != nil {
			return err
		}
		s, err := probedclient.Open(ctx, client, cfg, pp, o.tls)
		if err != nil {
			return err
		}
		all = append(all, scraped{node: n, s: s})
		if all[len(all)-1].before, err = o.scrape(ctx, s); err != nil {
			return err
		}
	}
	select {
	case <-time.After(interval):
	case <-ctx.Done():
		return ctx.Err()
	}
	var rows []probeview.NodeCosts
	for _, sc := range all {
		after, err := o.scrape(ctx, sc.s)
		if err != nil {
			return err
		}
		costs, err := probeview.Costs(sc.before, after)
		if err != nil {
			return err
		}
		rows = append(rows, probeview.NodeCosts{Node: sc.node, Costs: costs})
	}
	return probeview.Top(o.streams.Out, rows, interval)
}

func (o *options) scrape(ctx context.Context, s *probedclient.Session) (probeview.Scrape, error) {
	body, err := s.Get(ctx, "/metrics", "")
	if err != nil {
		return probeview.Scrape{}, err
	}
	return probeview.ParseScrape(bytes.NewReader(body), o.clock.Now())
}
