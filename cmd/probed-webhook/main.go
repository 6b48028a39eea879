// Command probed-webhook is probed's optional adoption webhook (contract
// §8): a mutating admission webhook that moves the spec probes of new pods
// in namespaces labelled probed.io/inject=enabled (or of pods labelled so)
// into the probed.io/probes annotation, and a validating one that refuses
// an annotation the daemon would report as InvalidProbe. It keeps its own
// serving certificate, and exports a gauge of pods whose probed.io/ready
// gate nobody answers. See docs/webhook.md.
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/spf13/pflag"
	logsapi "k8s.io/component-base/logs/api/v1"
	"k8s.io/klog/v2"

	"github.com/probed-dev/probed/internal/cliflags"
	"github.com/probed-dev/probed/internal/logflags"
	"github.com/probed-dev/probed/pkg/version"
)

func main() {
	o := &options{}
	fs, logging, showVersion := newFlagSet(o)
	if err := cliflags.Parse(fs, os.Args[1:]); err != nil {
		os.Exit(cliflags.Exit(err, fs, cliflags.Usage(fs, usageHeader), os.Stdout, os.Stderr))
	}
	if *showVersion {
		fmt.Println(version.String("probed-webhook"))
		return
	}
	if err := logflags.Apply(logging); err != nil {
		fmt.Fprintf(os.Stderr, "probed-webhook: %v\n", err)
		os.Exit(2)
	}
	if err := o.validate(); err != nil {
		fmt.Fprintf(os.Stderr, "probed-webhook: %v\n", err)
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	if err := run(ctx, o); err != nil {
		klog.ErrorS(err, "probed-webhook failed")
		klog.Flush()
		os.Exit(1)
	}
	klog.Flush()
}

// newFlagSet is the webhook's command line: component-base's logging
// flags, as probed's, the options, and --version.
func newFlagSet(o *options) (*pflag.FlagSet, *logsapi.LoggingConfiguration, *bool) {
	return cliflags.NewFlagSet("probed-webhook", o.addFlags)
}

const usageHeader = "Usage: probed-webhook [flags]\n\nprobed's adoption webhook (docs/webhook.md).\n"
