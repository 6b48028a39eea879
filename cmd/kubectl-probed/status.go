package main

import (
	"bytes"
	"fmt"
	"net/url"

	"github.com/spf13/cobra"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/cli-runtime/pkg/genericclioptions"

	"github.com/probed-dev/probed/pkg/probedclient"
	"github.com/probed-dev/probed/pkg/probeview"
)

func newStatus(o *options) *cobra.Command {
	pf := printFlags()
	cmd := &cobra.Command{
		Use:   "status POD",
		Short: "Each probe of a pod: its state and last 10 results",
		Long: `Show each probe of a pod: its state, its last counted result, a strip of its
last 10 results and, per probe, those results with their output.

It asks the probed pod on the pod's node (GET /debug/probes), which needs the
ClusterRole probed-debug-reader.`,
		Example: `  kubectl probed status web -n shop
  kubectl probed status web -o json
  kubectl probed status web -o jsonpath='{range [*]}{.container} {.probeType} {.lastResult}{"\\n"}{end}'`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if *pf.OutputFormat != "" {
				if _, err := pf.ToPrinter(); err != nil {
					return err
				}
			}
			return o.status(cmd, args[0], pf)
		},
	}
	// -o json|yaml|jsonpath=...|go-template=...: probed's /debug/probes
	// entries as they are.
	pf.AddFlags(cmd)
	return cmd
}

func (o *options) status(cmd *cobra.Command, name string, pf *genericclioptions.PrintFlags) error {
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
	s, err := probedclient.Open(ctx, client, cfg, pp, o.probedOptions(client))
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
	if *pf.OutputFormat != "" {
		if mine == nil {
			mine = []probeview.Probe{}
		}
		return printObject(pf, mine, out)
	}
	fmt.Fprintf(out, "Pod %s/%s on node %s (probed pod %s/%s)\n\n", ns, name, pod.Spec.NodeName, pp.Namespace, pp.Name)
	if len(mine) == 0 {
		fmt.Fprintf(out, "probed runs no probe for this pod: it has no %s annotation (or probed's --probe-source does not take its spec probes).\n", "probed.io/probes")
		return nil
	}
	return probeview.Status(out, mine, probeview.StatusOptions{Now: o.clock.Now()})
}
