// Package kill owns what happens after a liveness or startup probe reaches
// its failure threshold: whether the container is stopped now, later or
// not at all, and how. The worker calls one Killer; cmd/probed builds the
// chain once:
//
//	Guard -> RuntimeKiller -> the runtime (cri.Runtime)
//
// Guard holds kills back, in this order:
//
//   - the workload guard (Workloads, workloads.go): no liveness kill while
//     more than half of the pods of a ReplicaSet, StatefulSet or DaemonSet
//     on this node are failing liveness together. The paused kill is
//     cancelled (DeferredError.Reprobe): the worker starts the probe over
//     and asks again at its next failure threshold. Pods with no such
//     controller, and workloads with one active pod on this node, are not
//     guarded;
//   - the node's restart budget (Budget, budget.go): a token bucket
//     (golang.org/x/time/rate) of restarts per minute shared by every
//     worker on the node, and under it a fair share for each namespace
//     restarting containers. A kill over either is deferred: the worker
//     stays on hold and retries on its next period while the container
//     runs. A kill decision spends one restart, however often a failed
//     stop is retried.
//
// Every deferral is reported with a Warning event and a metric.
//
// RuntimeKiller then stops the container in the steps of the kubelet's
// killContainer (runtime.go): the Killing event (message.go), the preStop
// hook (prestop.go), the runtime's stop with what is left of the grace
// period. The grace period and its floor are in grace.go. See
// docs/security.md.
package kill
