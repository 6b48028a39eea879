// Command probed is a node-side Kubernetes probing daemon: it runs the
// liveness, readiness and startup probes declared on its node's pods and
// writes their results back to the API server.
//
//	probed --node-name=… [flags]   the daemon
//	probed convert [flags] [file…] hand manifests' spec probes to probed
package main

import (
	"os"

	"github.com/spf13/pflag"
	logsapi "k8s.io/component-base/logs/api/v1"

	"github.com/probed-dev/probed/internal/cliflags"
	"github.com/probed-dev/probed/internal/daemon"
)

func main() {
	if isSubcommand(os.Args[1:]) {
		os.Exit(runSubcommand(os.Args[1], os.Args[2:], os.Stdin, os.Stdout, os.Stderr))
	}
	os.Exit(daemon.Command[options]{
		Name: "probed", Usage: usageHeader, FlagSet: newFlagSet, Validate: (*options).validate, Run: run,
	}.Main(os.Args[1:]))
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
