// Package probeview turns what probed serves into what `kubectl probed`
// prints: /debug/probes snapshots into a status table with a one-line result
// strip per probe, two /metrics scrapes into each probe's cost (duration
// p99, failures, executions per minute), and pods with probed's own pods
// into who probes what (who.go). It does no I/O besides writing to
// the io.Writer it is given, so every number it prints is unit-tested.
package probeview
