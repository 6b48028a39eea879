// Package worker runs one probe loop per (pod UID, container, probe type).
//
// A Worker reproduces the kubelet's prober worker (pkg/kubelet/prober/worker.go,
// Kubernetes 1.37): the same doProbe order, thresholds, on-hold rule,
// initial delay, startup gating and start-up jitter. It differs where probed
// must: the pod comes from the informer cache (PodSource), "started" is
// probed's own (Config.Started), time comes from an injected clock, metrics
// are not package globals, and a panic is logged and counted, never eaten.
//
// Scheduling: each worker keeps its own goroutine, as in the kubelet, but
// the ticks come from one shared timer heap (scheduler.go) rather than one
// runtime timer per worker, and an idle tick allocates nothing.
package worker
