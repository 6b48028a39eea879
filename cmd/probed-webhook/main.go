// Command probed-webhook is probed's optional adoption webhook (contract
// §8): a mutating admission webhook that moves the spec probes of new pods
// in namespaces labelled probed.io/inject=enabled (or of pods labelled so)
// into the probed.io/probes annotation, and a validating one that refuses
// an annotation the daemon would report as InvalidProbe. It keeps its own
// serving certificate, and exports a gauge of pods whose probed.io/ready
// gate nobody answers. See docs/webhook.md.
package main

import (
	"os"

	"github.com/spf13/pflag"
	logsapi "k8s.io/component-base/logs/api/v1"

	"github.com/probed-dev/probed/internal/cliflags"
	"github.com/probed-dev/probed/internal/daemon"
)

func main() {
	os.Exit(daemon.Command[options]{
		Name: "probed-webhook", Usage: usageHeader, FlagSet: newFlagSet, Validate: (*options).validate, Run: run,
	}.Main(os.Args[1:]))
}

// newFlagSet is the webhook's command line: component-base's logging
// flags, as probed's, the options, and --version.
func newFlagSet(o *options) (*pflag.FlagSet, *logsapi.LoggingConfiguration, *bool) {
	return cliflags.NewFlagSet("probed-webhook", o.addFlags)
}

const usageHeader = "Usage: probed-webhook [flags]\n\nprobed's adoption webhook (docs/webhook.md).\n"
