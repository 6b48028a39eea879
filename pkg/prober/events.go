package prober

// Event reasons the prober emits. They are the kubelet's, so that existing
// alerts and `kubectl get events --field-selector reason=...` keep working.
const (
	// ReasonUnhealthy marks a probe that failed or errored.
	ReasonUnhealthy = "Unhealthy"
	// ReasonProbeWarning marks a probe that passed with a warning, such as an
	// HTTP redirect to another host that was not followed.
	ReasonProbeWarning = "ProbeWarning"
)
