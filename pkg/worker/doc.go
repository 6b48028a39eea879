// Package worker runs one probe loop per (pod UID, container, probe type).
//
// A Worker reproduces the kubelet's prober worker (pkg/kubelet/prober/worker.go,
// Kubernetes 1.37): the same doProbe order, thresholds, on-hold rule,
// initial delay, startup gating and start-up jitter. It differs where probed
// must: the pod comes from the informer cache (PodSource), "started" is
// probed's own (Config.Started), time comes from an injected clock, metrics
// are not package globals, and a panic is logged and counted, never eaten.
//
// Scheduling is the kubelet's: each worker's goroutine waits in a select on
// its own ticker, a manual trigger, Stop and its context.
package worker
