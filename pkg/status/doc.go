// Package status is the only code in probed that writes to the API server.
//
// It has three layers, each in its own file:
//
//   - derive.go turns probe results and container statuses into a PodState,
//     the complete desired state of one pod's probed probes (pure functions);
//   - conditions.go turns a PodState into the pod conditions probed owns, and
//     seed.go reads them back after a restart of probed (pure functions);
//   - writer.go keeps the API server in line with the desired state: it
//     coalesces per pod, writes only real changes, retries with backoff and
//     repairs drift on a heartbeat.
//
// The condition types, reasons and the write modes are part of probed's
// external contract (contract.md §2); reasons.go lists every reason.
package status
