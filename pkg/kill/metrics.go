package kill

import "github.com/prometheus/client_golang/prometheus"

// Deferral reasons, the "reason" label of probed_restarts_deferred_total.
const (
	// DeferBudget: the node's restart budget was spent.
	DeferBudget = "budget"
	// DeferWorkloadGuard: most of the workload's pods on the node were
	// failing liveness.
	DeferWorkloadGuard = "workload_guard"
	// DeferPDB: a PodDisruptionBudget that selects the pod allowed no
	// disruption (--pdb-restarts).
	DeferPDB = "pdb"
)

// Metrics holds the restart guard's metrics. A nil *Metrics records nothing.
//
//   - probed_restarts_deferred_total{reason}: counter of container restarts
//     deferred by reason (budget or workload_guard), counted once per
//     deferral, not once per retry: when a container instance's restart is
//     first held back for that reason (again after 10 minutes without an
//     attempt).
//   - probed_restarts_paused_workloads: gauge of workloads (ReplicaSets,
//     StatefulSets, DaemonSets) whose liveness restarts on this node are
//     paused by the workload guard, as of the last kill attempt or liveness
//     change.
//   - probed_restarts_pdb_unchecked_total: counter of kills under
//     --pdb-restarts whose PodDisruptionBudgets could not be checked (the
//     API server could not be reached), left to the node-local guards.
type Metrics struct {
	deferred  *prometheus.CounterVec
	paused    prometheus.Gauge
	unchecked prometheus.Counter
}

// NewMetrics creates the metrics and registers them with reg (unless reg
// is nil). Both reasons are present at zero from the start.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		deferred: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "probed_restarts_deferred_total",
			Help: "Container restarts after a liveness or startup failure that were deferred, by reason (budget, workload_guard, pdb).",
		}, []string{"reason"}),
		paused: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "probed_restarts_paused_workloads",
			Help: "Workloads whose liveness restarts on this node are paused because more than half of their pods here are failing liveness.",
		}),
		unchecked: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "probed_restarts_pdb_unchecked_total",
			Help: "Container restarts under --pdb-restarts whose PodDisruptionBudgets could not be checked, left to the node-local guards.",
		}),
	}
	m.deferred.WithLabelValues(DeferBudget)
	m.deferred.WithLabelValues(DeferWorkloadGuard)
	m.deferred.WithLabelValues(DeferPDB)
	if reg != nil {
		reg.MustRegister(m.deferred, m.paused, m.unchecked)
	}
	return m
}

func (m *Metrics) countDeferred(reason string) {
	if m != nil {
		m.deferred.WithLabelValues(reason).Inc()
	}
}

func (m *Metrics) setPaused(n int) {
	if m != nil {
		m.paused.Set(float64(n))
	}
}

func (m *Metrics) countUnchecked() {
	if m != nil {
		m.unchecked.Inc()
	}
}
