// Package results caches the latest probe result per container and tells
// consumers what changed without ever blocking the workers that write it.
package results

// Result is a probe's verdict on a container, as the kubelet's results.Result.
type Result int

const (
	Unknown Result = iota - 1
	Success
	Failure
)

func (r Result) String() string {
	switch r {
	case Success:
		return "Success"
	case Failure:
		return "Failure"
	}
	return "UNKNOWN"
}

// MetricLabel is the kubelet's prober_probe_total "result" label value.
func (r Result) MetricLabel() string {
	switch r {
	case Success:
		return "successful"
	case Failure:
		return "failed"
	}
	return "unknown"
}
