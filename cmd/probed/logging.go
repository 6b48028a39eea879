package main

import (
	"flag"

	logsapi "k8s.io/component-base/logs/api/v1"
	// Registers --logging-format=json.
	_ "k8s.io/component-base/logs/json/register"
)

// addLoggingFlags registers component-base's logging flags (-v, --vmodule,
// --logging-format, ...), as Kubernetes components have them. klog's legacy
// flags (-logtostderr, -log_file, ...) are not registered: component-base
// deprecated them and they do not combine with --logging-format=json.
func addLoggingFlags(fs *flag.FlagSet) *logsapi.LoggingConfiguration {
	c := logsapi.NewLoggingConfiguration()
	logsapi.AddGoFlags(c, fs)
	return c
}

// applyLogging validates the logging flags and applies them to klog; call it
// before any goroutine logs.
func applyLogging(c *logsapi.LoggingConfiguration) error {
	return logsapi.ValidateAndApply(c, nil)
}
