package main

import (
	"bytes"
	"context"
	"fmt"
	"net/url"
	"strings"

	"github.com/spf13/cobra"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/client-go/kubernetes"

	"github.com/probed-dev/probed/pkg/probedclient"
	"github.com/probed-dev/probed/pkg/probeview"
)

// statusOptions are status's own flags.
type statusOptions struct {
	selector      string
	allNamespaces bool
	print         *genericclioptions.PrintFlags
}

func newStatus(o *options) *cobra.Command {
	s := statusOptions{print: printFlags()}
	cmd := &cobra.Command{
		Use:   "status [POD | TYPE/NAME...] [-l SELECTOR] [-A]",
		Short: "Who probes which pods; for one pod, each probe's state and last 10 results",
		Long: `Show who probes each pod: for every probe, whether probed runs it (from the
probed.io/probes annotation), the kubelet (from the pod spec), both, or nobody (an
annotation probe probed refuses); whether the pod has the probed.io/ready
readiness gate; the probed pod on its node and whether it is ready; the pod's
probed.io/ready condition; and what is wrong. A pod gated on a node where no
ready probed runs is named: nothing updates its readiness.

Pods are named as in kubectl: pod names, TYPE/NAME of a workload or service
(deployment, statefulset, daemonset, replicaset, job, replicationcontroller,
service: its pods, by its selector), -l SELECTOR, or nothing for every pod of
the namespace; -A for every namespace. This reads the API server only.

For one pod (POD or pod/POD), it also asks the probed pod on the pod's node
(GET /debug/probes, which needs the ClusterRole probed-debug-reader) for each
probe's state, its last counted result, a strip of its last 10 results and,
per probe, those results with their output.`,
		Example: `  kubectl probed status -n shop
  kubectl probed status deploy/web statefulset/db -n shop
  kubectl probed status -l app.kubernetes.io/part-of=shop -A
  kubectl probed status web-7d9f8-x2x4q -n shop
  kubectl probed status deploy/web -o json
  kubectl probed status web-7d9f8-x2x4q -o jsonpath='{range [*]}{.container} {.probeType} {.lastResult}{"\\n"}{end}'`,
		RunE: func(cmd *cobra.Command, args []string) error {
			// As kubectl: names are not looked up by selector or across
			// namespaces.
			if len(args) > 0 && (s.selector != "" || s.allNamespaces) {
				return fmt.Errorf("name pods or workloads, or select pods with -l or -A, not both")
			}
			if *s.print.OutputFormat != "" {
				if _, err := s.print.ToPrinter(); err != nil {
					return err
				}
			}
			if name, ok := onePod(args, s); ok {
				return o.status(cmd.Context(), name, s.print)
			}
			return o.who(cmd.Context(), args, s)
		},
	}
	cmd.Flags().StringVarP(&s.selector, "selector", "l", "", "label selector of the pods to show (as kubectl's -l)")
	cmd.Flags().BoolVarP(&s.allNamespaces, "all-namespaces", "A", false, "pods of every namespace")
	// -o json|yaml|jsonpath=...|go-template=...: for one pod, probed's
	// /debug/probes entries as they are; else the rows, one object a pod.
	s.print.AddFlags(cmd)
	return cmd
}

// onePod returns the pod's name when args name one pod (POD or pod/POD)
// and nothing else: status then shows its probes' history too.
func onePod(args []string, s statusOptions) (string, bool) {
	if len(args) != 1 || s.selector != "" || s.allNamespaces {
		return "", false
	}
	kind, name, found := strings.Cut(args[0], "/")
	switch {
	case !found:
		return kind, true
	case kind == "pod" || kind == "pods" || kind == "po":
		return name, name != ""
	}
	return "", false
}

// who prints who probes the pods args and the flags name.
func (o *options) who(ctx context.Context, args []string, s statusOptions) error {
	_, client, err := o.clients()
	if err != nil {
		return err
	}
	ns, _, err := o.kube.ToRawKubeConfigLoader().Namespace()
	if err != nil {
		return err
	}
	pods, err := resolvePods(ctx, o.kube, client, ns, args, s.selector, s.allNamespaces)
	if err != nil {
		return err
	}
	probed, err := o.probedByNode(ctx, client, "")
	if err != nil {
		return err
	}
	views := make([]probeview.PodView, 0, len(pods))
	for i := range pods {
		views = append(views, probeview.ViewPod(&pods[i], probed))
	}
	if *s.print.OutputFormat != "" {
		return printObject(s.print, views, o.streams.Out)
	}
	if len(views) == 0 {
		if s.allNamespaces {
			fmt.Fprintln(o.streams.ErrOut, "No pods found.")
		} else {
			fmt.Fprintf(o.streams.ErrOut, "No pods found in %s namespace.\n", ns)
		}
		return nil
	}
	if err := probeview.Who(o.streams.Out, views, probeview.WhoOptions{Namespaces: s.allNamespaces}); err != nil {
		return err
	}
	if w := probeview.UnansweredWarning(views); w != "" {
		fmt.Fprintln(o.streams.ErrOut, "warning: "+w)
	}
	return nil
}

// probedByNode lists probed's pods (on node, or everywhere when "") and
// picks the one that serves each node.
func (o *options) probedByNode(ctx context.Context, client kubernetes.Interface, node string) (map[string]*probeview.ProbedPod, error) {
	opts := metav1.ListOptions{LabelSelector: o.selector}
	if node != "" {
		opts.FieldSelector = fields.OneTermEqualSelector("spec.nodeName", node).String()
	}
	list, err := client.CoreV1().Pods(o.probedNS).List(ctx, opts)
	if err != nil {
		return nil, fmt.Errorf("listing probed's pods (namespace %s, selector %s): %w%s", o.probedNS, o.selector, err, probedclient.RoleHint(err))
	}
	return probeview.ProbedByNode(list.Items), nil
}

// status shows one pod: who probes it, then its probes' state and history
// from the probed pod on its node.
func (o *options) status(ctx context.Context, name string, pf *genericclioptions.PrintFlags) error {
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
	out := o.streams.Out
	if *pf.OutputFormat == "" {
		if err := o.whoOne(ctx, client, pod); err != nil {
			return err
		}
		fmt.Fprintln(out)
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

// whoOne prints the pod's row of the who-probes-what table.
func (o *options) whoOne(ctx context.Context, client kubernetes.Interface, pod *corev1.Pod) error {
	probed := map[string]*probeview.ProbedPod{}
	if pod.Spec.NodeName != "" {
		var err error
		if probed, err = o.probedByNode(ctx, client, pod.Spec.NodeName); err != nil {
			return err
		}
	}
	return probeview.Who(o.streams.Out, []probeview.PodView{probeview.ViewPod(pod, probed)}, probeview.WhoOptions{})
}
