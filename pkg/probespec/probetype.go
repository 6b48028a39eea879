package probespec

// ProbeType names which of a container's probes is meant.
type ProbeType int

const (
	Liveness ProbeType = iota
	Readiness
	Startup
)

// String gives the kubelet's spelling, used in events and metric labels.
func (t ProbeType) String() string {
	switch t {
	case Liveness:
		return "Liveness"
	case Readiness:
		return "Readiness"
	case Startup:
		return "Startup"
	}
	return "Unknown"
}
