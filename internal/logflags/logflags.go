// Package logflags registers component-base's logging flags (-v/--v, --vmodule,
// --logging-format, --log-flush-frequency) as probed's binaries offer them:
// only those that work without a feature gate, each typed for the chart's
// schema. component-base's [Alpha] options (split streams, info buffers) are
// left out: without the LoggingAlphaOptions gate, which probed has no way to
// turn on, they stop the binary at start ("Feature LoggingAlphaOptions is
// disabled"). klog's legacy flags (-logtostderr, -log_file, ...) are not
// registered either: component-base deprecated them and they do not combine
// with --logging-format=json.
package logflags

import (
	"strings"

	"github.com/spf13/pflag"
	logsapi "k8s.io/component-base/logs/api/v1"
	// Registers --logging-format=json.
	_ "k8s.io/component-base/logs/json/register"

	"github.com/probed-dev/probed/internal/flagschema"
)

// Formats are the --logging-format values this binary has: component-base's
// text, and json, registered by the import above.
var Formats = []string{logsapi.DefaultLogFormat, logsapi.JSONLogFormat}

// Add registers the logging flags on fs and returns the configuration they
// fill; pass it to Apply once the flags are parsed.
// -v keeps component-base's shorthand: -v=4, -v 4 and --v=4 alike.
func Add(fs *pflag.FlagSet) *logsapi.LoggingConfiguration {
	c := logsapi.NewLoggingConfiguration()
	all := pflag.NewFlagSet("logging", pflag.ContinueOnError)
	logsapi.AddFlags(c, all)
	all.VisitAll(func(f *pflag.Flag) {
		switch {
		case strings.HasPrefix(f.Usage, "[Alpha]"):
			// Needs a feature gate probed does not offer.
		case f.Name == "logging-format":
			flagschema.EnumVar(fs, &c.Format, f.Name, c.Format, f.Usage, Formats...)
		case f.Name == "v":
			fs.VarP(flagschema.Described{Value: f.Value, Schema: map[string]any{
				"type": "integer", "minimum": 0, "maximum": 1<<31 - 1}}, f.Name, f.Shorthand, f.Usage)
		case f.Name == logsapi.LogFlushFreqFlagName:
			// component-base refuses 0 and below at start: so does the flag.
			flagschema.PositiveDurationVar(fs, &c.FlushFrequency.Duration.Duration, f.Name, c.FlushFrequency.Duration.Duration, f.Usage)
		case f.Name == "vmodule":
			fs.Var(flagschema.Described{Value: f.Value, Schema: map[string]any{
				"type": "string", "pattern": `^([^,=]+=[0-9]+(,[^,=]+=[0-9]+)*)?$`}}, f.Name, f.Usage)
		default:
			fs.AddFlag(f)
		}
	})
	return c
}

// Apply validates the parsed logging flags and applies them to klog; call it
// before any goroutine logs.
func Apply(c *logsapi.LoggingConfiguration) error {
	return logsapi.ValidateAndApply(c, nil)
}
