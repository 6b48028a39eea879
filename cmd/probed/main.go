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
	if isSubcommand(os.Args[1:]) {
		os.Exit(runSubcommand(os.Args[1], os.Args[2:], os.Stdin, os.Stdout, os.Stderr))
	}
	o := &options{}
	fs, logging, showVersion := newFlagSet(o)
	if err := cliflags.Parse(fs, os.Args[1:]); err != nil {
		os.Exit(cliflags.Exit(err, fs, usage(fs), os.Stdout, os.Stderr))
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
	fs := pflag.NewFlagSet("probed", pflag.ContinueOnError)
	logging := logflags.Add(fs)
	o.addFlags(fs)
	showVersion := fs.Bool("version", false, "print the version and exit")
	return fs, logging, showVersion
}

// usage is probed --help.
func usage(fs *pflag.FlagSet) func(io.Writer) {
	return func(w io.Writer) {
		fmt.Fprintf(w, "Usage: probed [flags]                     (the daemon)\n       probed convert [flags] [file...]  (see probed convert --help)\n       probed approved-reach [POD.yaml]  (see probed approved-reach --help)\n\nFlags:\n%s", fs.FlagUsages())
	}
}
