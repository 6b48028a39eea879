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
	"io"
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
		os.Exit(cliflags.Exit(err, fs, usage(fs), os.Stdout, os.Stderr))
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
	fs := pflag.NewFlagSet("probed-webhook", pflag.ContinueOnError)
	logging := logflags.Add(fs)
	o.addFlags(fs)
	showVersion := fs.Bool("version", false, "print the version and exit")
	return fs, logging, showVersion
}

// usage is probed-webhook --help.
func usage(fs *pflag.FlagSet) func(io.Writer) {
	return func(w io.Writer) {
		fmt.Fprintf(w, "Usage: probed-webhook [flags]\n\nprobed's adoption webhook (docs/webhook.md).\n\nFlags:\n%s", fs.FlagUsages())
	}
}
