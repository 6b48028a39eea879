// Package status is the only code in probed that writes to the API server.
//
// It has three layers, each in its own file:
//
//   - derive.go turns probe results and container statuses into a PodState,
//     the complete desired state of one pod's probed probes (pure functions);
//   - conditions.go turns a PodState into the pod conditions probed owns, and
//     seed.go reads them back after a restart of probed (pure functions);
//   - writer.go keeps the API server in line with the desired state: on a
//     rate-limited delaying workqueue, it coalesces per pod, retries with
//     backoff (outage.go: one backoff for all while the API server is down)
//     and repairs drift on a heartbeat (resync.go); writes.go is one write,
//     made only for a real change.
//
// The condition types, reasons and the write modes are part of probed's
// external contract (contract.md §2); reasons.go lists every reason.
package status
