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
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"k8s.io/klog/v2"

	"github.com/probed-dev/probed/internal/logflags"
	"github.com/probed-dev/probed/pkg/version"
)

func main() {
	o := &options{}
	fs := flag.NewFlagSet("probed-webhook", flag.ExitOnError)
	// component-base's logging flags, as probed's.
	logging := logflags.Add(fs)
	o.addFlags(fs)
	showVersion := fs.Bool("version", false, "print the version and exit")
	_ = fs.Parse(os.Args[1:])
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
