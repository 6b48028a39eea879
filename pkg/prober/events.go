package prober

// Event reasons the prober emits. They are the kubelet's, so that existing
// alerts and `kubectl get events --field-selector reason=...` keep working.
const (
	// ReasonInvalidProbe marks a probe this pod can never have run as
	// declared (ErrPodNetworkUnsupported), as the manager's InvalidProbe.
	ReasonInvalidProbe = "InvalidProbe"
	// ReasonUnhealthy marks a probe that failed or errored.
	ReasonUnhealthy = "Unhealthy"
	// ReasonProbeWarning marks a probe that passed with a warning, such as an
	// HTTP redirect to another host that was not followed.
	ReasonProbeWarning = "ProbeWarning"
	// ReasonProbeResultChanged marks a probe whose decided result flipped
	// (Normal; probed's own, behind --probe-result-change-events, as
	// kubernetes PR 135401 proposes for the kubelet).
	ReasonProbeResultChanged = "ProbeResultChanged"
)
