// Command probed is a node-side Kubernetes probing daemon: it runs the
// liveness, readiness and startup probes declared on its node's pods and
// writes their results back to the API server.
//
//	probed --node-name=… [flags]   the daemon
//	probed convert [flags] [file…] hand manifests' spec probes to probed
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
	if isSubcommand(os.Args[1:]) {
		os.Exit(runSubcommand(os.Args[1], os.Args[2:], os.Stdin, os.Stdout, os.Stderr))
	}
	o := &options{}
	fs, logging, showVersion := newFlagSet(o)
	if err := cliflags.Parse(fs, os.Args[1:]); err != nil {
		os.Exit(cliflags.Exit(err, fs, cliflags.Usage(fs, usageHeader), os.Stdout, os.Stderr))
	}
	if *showVersion {
		fmt.Println(version.String("probed"))
		return
	}
	if err := logflags.Apply(logging); err != nil {
		fmt.Fprintf(os.Stderr, "probed: %v\n", err)
		os.Exit(2)
	}
	if err := o.validate(); err != nil {
		fmt.Fprintf(os.Stderr, "probed: %v\n", err)
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	if err := run(ctx, o); err != nil {
		klog.ErrorS(err, "probed failed")
		klog.Flush()
		os.Exit(1)
	}
	klog.Flush()
}

// newFlagSet is the daemon's command line: component-base's logging flags,
// the options, and --version. The chart's values.schema.json is generated
// from it (TestChartValuesSchema).
func newFlagSet(o *options) (*pflag.FlagSet, *logsapi.LoggingConfiguration, *bool) {
	return cliflags.NewFlagSet("probed", o.addFlags)
}

const usageHeader = `Usage: probed [flags]                     (the daemon)
       probed convert [flags] [file...]  (see probed convert --help)
       probed approved-reach [POD.yaml]  (see probed approved-reach --help)
`
