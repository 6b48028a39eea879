package main

import (
	"context"
	goflag "flag"
	"fmt"
	"os/signal"
	"syscall"

	"github.com/spf13/cobra"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	"github.com/probed-dev/probed/pkg/probedclient"
	"github.com/probed-dev/probed/pkg/version"
)

type streams = genericiooptions.IOStreams

// options are the flags every subcommand shares: kubectl's own (through
// cli-runtime, so --kubeconfig, --context, -n, --token … work as in
// kubectl) and where probed runs.
type options struct {
	kube     *genericclioptions.ConfigFlags
	probedNS string
	selector string
	tls      probedclient.TLSOptions
	token    probedclient.TokenOptions
	streams  streams
	clock    clock.PassiveClock
	convert  convertFunc
}

func (o *options) clients() (*rest.Config, kubernetes.Interface, error) {
	cfg, err := o.kube.ToRESTConfig()
	if err != nil {
		return nil, nil, err
	}
	c, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, nil, err
	}
	return cfg, c, nil
}

func (o *options) locator(c kubernetes.Interface) probedclient.Locator {
	return probedclient.Locator{Client: c, Namespace: o.probedNS, Selector: o.selector}
}

func newRoot(s streams, clk clock.PassiveClock, convert convertFunc) *cobra.Command {
	o := &options{kube: genericclioptions.NewConfigFlags(true), streams: s, clock: clk, convert: convert}
	root := &cobra.Command{
		Use: "kubectl-probed",
		// Help and usage say "kubectl probed", as kubectl runs it.
		Annotations: map[string]string{cobra.CommandDisplayNameAnnotation: "kubectl probed"},
		Short:       "Inspect probed, the node-side probing daemon",
		Long: `Inspect probed, the node-side probing daemon: what its probes do and cost.

status and top read probed's /debug/probes and /metrics on the node, through
the API server (a port-forward to the probed pod). Your own credentials go to
the API server only: probed is shown a 10-minute token of the service account
probed-plugin, issued for probed alone, over TLS verified against the CA the
probed pod publishes. You need the Role probed-plugin-user in probed's
namespace (deploy/kubectl-plugin.yaml).`,
		Version:       version.String("kubectl-probed"),
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.SetVersionTemplate("{{.Version}}\n")
	root.CompletionOptions.DisableDefaultCmd = true
	root.SetIn(s.In)
	root.SetOut(s.Out)
	root.SetErr(s.ErrOut)
	pf := root.PersistentFlags()
	// probed sees the plugin's service account's token, whoever asks
	// (probedclient): --as, --as-group, --as-uid and --as-user-extra are
	// not offered.
	o.kube.Impersonate, o.kube.ImpersonateGroup, o.kube.ImpersonateUID, o.kube.ImpersonateUserExtra = nil, nil, nil, nil
	o.kube.AddFlags(pf)
	// -v is klog's verbosity, as in kubectl (client-go logs its requests
	// from -v=6); --version has no shorthand.
	klogFlags := goflag.NewFlagSet("klog", goflag.ContinueOnError)
	klog.InitFlags(klogFlags)
	pf.AddGoFlag(klogFlags.Lookup("v"))
	pf.AddGoFlag(klogFlags.Lookup("vmodule"))
	pf.StringVar(&o.probedNS, "probed-namespace", probedclient.DefaultNamespace, "the namespace of probed's DaemonSet")
	pf.StringVar(&o.selector, "probed-selector", probedclient.DefaultSelector, "the labels of probed's pods")
	pf.StringVar(&o.tls.CAFile, "probed-ca-file", "", "verify probed's serving certificate against this CA (for probed's --tls-cert-file) instead of the CA the probed pod publishes")
	pf.StringVar(&o.tls.ServerName, "probed-server-name", "", "the name to check in probed's certificate (default: the node's name; with --probed-ca-file, 127.0.0.1, the port-forward's end)")
	pf.BoolVar(&o.tls.InsecureSkipVerify, "probed-insecure-skip-tls-verify", false, "do not verify probed's certificate: whatever answers on probed's port gets the (short-lived, probed-only) token")
	pf.StringVar(&o.token.ServiceAccount, "probed-service-account", probedclient.DefaultServiceAccount, "the service account, in --probed-namespace, whose short-lived token is shown to probed (needs create on its serviceaccounts/token)")
	pf.StringVar(&o.token.Audience, "probed-token-audience", probedclient.DefaultAudience, "the audience of that token: one of probed's --endpoint-token-audiences")
	root.AddCommand(newStatus(o), newTop(o), newConvert(o))
	return root
}

// run is main without the process: it returns the exit code.
func run(args []string, s streams, clk clock.PassiveClock, convert convertFunc) int {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	root := newRoot(s, clk, convert)
	root.SetArgs(args)
	if err := root.ExecuteContext(ctx); err != nil {
		var code exitCode
		if asExitCode(err, &code) {
			return int(code)
		}
		fmt.Fprintln(s.ErrOut, "error:", err)
		return 1
	}
	return 0
}

// exitCode ends the command with that code and no message (convert's own).
type exitCode int

func (e exitCode) Error() string { return fmt.Sprintf("exit code %d", int(e)) }

func asExitCode(err error, code *exitCode) bool {
	c, ok := err.(exitCode)
	if ok {
		*code = c
	}
	return ok
}
