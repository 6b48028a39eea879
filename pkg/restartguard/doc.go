// Package restartguard bounds the container restarts that probed's liveness
// and startup probes cause, so that a failure shared by many pods (a
// database outage that fails every liveness probe, a slow node) does not
// turn into a restart storm that makes it worse.
//
// Two limits apply, in this order, before a kill reaches the runtime:
//
//   - the workload guard (Workloads): no liveness kill while more than half
//     of the pods of a ReplicaSet, StatefulSet or DaemonSet on this node are
//     failing liveness together. The paused kill is cancelled: the probe
//     starts over and asks again at its next failure threshold. Pods with no
//     such controller, and workloads with one active pod on this node, are
//     not guarded;
//   - the node budget (Budget): a token bucket of restarts per minute shared
//     by every worker on the node, and under it a fair share for each
//     namespace restarting containers. A kill over either is deferred: the
//     worker stays on hold and retries on its next period while the
//     container runs. A kill decision spends one restart, however often a
//     failed stop is retried.
//
// Killer applies both in front of another worker.Killer and reports every
// deferral with a Warning event and a metric. See docs/security.md.
package restartguard
