package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/url"

	"github.com/spf13/cobra"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/probed-dev/probed/pkg/probedclient"
	"github.com/probed-dev/probed/pkg/probeview"
)

func newStatus(o *options) *cobra.Command {
	var output string
	cmd := &cobra.Command{
		Use:   "status POD",
		Short: "Each probe of a pod: its state and last 10 results",
		Long: `Show each probe of a pod: its state, its last counted result, a strip of its
last 10 results and, per probe, those results with their output.

It asks the probed pod on the pod's node (GET /debug/probes), which needs the
ClusterRole probed-debug-reader.`,
		Example: `  kubectl probed status web -n shop
  kubectl probed status web -o json`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if output != "" && output != "json" {
				return fmt.Errorf("--output %q: the only format is json", output)
			}
			return o.status(cmd, args[0], output)
		},
	}
	cmd.Flags().StringVarP(&output, "output", "o", "", "json: print probed's /debug/probes entries as they are")
	return cmd
}

func (o *options) status(cmd *cobra.Command, name, output string) error {
	ctx := cmd.Context()
	cfg, client, err := o.clients()
	if err != nil {
		return err
	}
	ns, _, err := o.kube.ToRawKubeConfigLoader().Namespace()
	if err != nil {
		return err
	}
	pod, err := client.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return err
	}
	if pod.Spec.NodeName == "" {
		return fmt.Errorf("pod %s/%s is not scheduled to a node yet: no probed probes it", ns, name)
	}
	pp, err := o.locator(client).Pod(ctx, pod.Spec.NodeName)
	if err != nil {
		return err
	}
	s, err := probedclient.Open(ctx, client, cfg, pp, o.tls)
	if err != nil {
		return err
	}
	defer s.Close()
	body, err := s.Get(ctx, "/debug/probes", url.Values{"namespace": {ns}, "pod": {name}}.Encode())
	if err != nil {
		return err
	}
	probes, err := probeview.DecodeProbes(bytes.NewReader(body))
	if err != nil {
		return err
	}
	// A pod recreated under the same name: keep only this one's probes.
	var mine []probeview.Probe
	for _, p := range probes {
		if p.PodUID == "" || p.PodUID == string(pod.UID) {
			mine = append(mine, p)
		}
	}
	out := o.streams.Out
	if output == "json" {
		enc := json.NewEncoder(out)
		enc.SetIndent("", "  ")
		return enc.Encode(mine)
	}
	fmt.Fprintf(out, "Pod %s/%s on node %s (probed pod %s/%s)\n\n", ns, name, pod.Spec.NodeName, pp.Namespace, pp.Name)
	if len(mine) == 0 {
		fmt.Fprintf(out, "probed runs no probe for this pod: it has no %s annotation (or probed's --probe-source does not take its spec probes).\n", "probed.io/probes")
		return nil
	}
	return probeview.Status(out, mine, probeview.StatusOptions{Now: o.clock.Now()})
}
