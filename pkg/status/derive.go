package status

import (
	"fmt"
	"strings"
	"unicode/utf8"

	v1 "k8s.io/api/core/v1"

	"github.com/probed-dev/probed/pkg/results"
)

// succeededMessage is the message of every condition a probe made True.
const succeededMessage = "probe succeeded"

// MaxMessageBytes caps every message probed writes (contract §2). Longer
// messages are cut at a UTF-8 boundary, so they stay valid UTF-8.
const MaxMessageBytes = 1024

// ProbeInput is what the status writer needs to know about one probed probe.
type ProbeInput struct {
	// Invalid marks a probe that failed validation. It is never run, and its
	// condition is False with reason InvalidProbe.
	Invalid bool
	// InvalidMessage says which field is wrong and why.
	InvalidMessage string
	// Known reports whether Result is a result for the current container
	// instance. The caller must leave it false when the only result it has
	// belongs to an earlier instance (an earlier container ID).
	Known bool
	// Result is the latest result (results.Success, Failure or Unknown).
	Result results.Result
	// Probed: a probe decided Result (or did before a restart of probed).
	// False for the kubelet's initial value of a new container instance,
	// which is not a probe's verdict: an initial Failure is ProbePending.
	Probed bool
	// Output is the output, or error text, of the probe that decided a
	// Failure. A success's output is never published.
	Output string
}

// ContainerInput is one container that has at least one probed probe
// (liveness, readiness or startup).
type ContainerInput struct {
	Name string
	// Status is the container's current status, nil if there is none yet.
	Status *v1.ContainerStatus
	// Readiness and Startup are nil when the container has no such probed
	// probe. A liveness probe needs no input: it never gates readiness.
	Readiness, Startup *ProbeInput
}

// ContainerState is the derived state of one container.
//
// Started and Ready are always set, with kubelet semantics; HasReadiness and
// HasStartup say whether probed owns a condition for them. The reason and
// message fields are set only when the matching Has* field is true.
type ContainerState struct {
	Name string

	HasReadiness bool
	// Ready is Started && running && (no readiness probe || readiness Success).
	Ready                     bool
	ReadyReason, ReadyMessage string

	HasStartup bool
	// Started is the startup probe's Success for the current container
	// instance when there is a probed startup probe, otherwise running.
	Started                       bool
	StartedReason, StartedMessage string
}

// PodState is the complete desired state of one pod's probed probes: one
// entry per container that has any probed probe, in the caller's order. An
// empty PodState means the pod has no probed probe, so probed owns no
// condition on it.
type PodState struct {
	Containers []ContainerState
	// Generation is the pod's metadata.generation when the state was
	// derived. Container-status mode writes the pod's generation as the
	// observedGeneration of ContainersReady and Ready, as the kubelet does
	// (PodObservedGenerationTracking, GA in 1.35): a new generation is a
	// change to write even when readiness is the same.
	Generation int64
}

// Derive computes a pod's desired state from its containers' probe results.
// It is a pure function. Pass every container that has any probed probe,
// including liveness-only ones (they make probed.io/ready exist).
//
// Per container (contract §2):
//   - started: the startup probe's Success for the current instance if the
//     container has a probed startup probe, otherwise running;
//   - ready: started && running && readiness Success (kubelet semantics);
//     without a readiness probe, started && running.
//
// Reasons, checked in this order (see reasons.go): InvalidProbe,
// ContainerNotRunning, WaitingForStartup (readiness only), ProbePending,
// ProbeSucceeded / ProbeFailed.
func Derive(in []ContainerInput) PodState {
	out := PodState{Containers: make([]ContainerState, 0, len(in))}
	for _, c := range in {
		out.Containers = append(out.Containers, deriveContainer(c))
	}
	return out
}

func deriveContainer(c ContainerInput) ContainerState {
	running := c.Status != nil && c.Status.State.Running != nil
	st := ContainerState{Name: c.Name}

	st.Started = running
	if p := c.Startup; p != nil {
		st.HasStartup = true
		st.Started, st.StartedReason, st.StartedMessage = judge(p, c.Status, running, true, "")
	}

	st.Ready = st.Started && running
	if p := c.Readiness; p != nil {
		st.HasReadiness = true
		waiting := ""
		if !st.Started {
			waiting = "waiting for the startup probe to succeed"
			if st.StartedReason != "" {
				waiting += " (" + st.StartedReason + ")"
			}
		}
		st.Ready, st.ReadyReason, st.ReadyMessage = judge(p, c.Status, running, st.Started, waiting)
	}
	return st
}

// judge decides one probe's condition. started is false only for a readiness
// probe whose container has not passed its startup probe; waitingMsg then
// explains why.
func judge(p *ProbeInput, cs *v1.ContainerStatus, running, started bool, waitingMsg string) (ok bool, reason, message string) {
	switch {
	case p.Invalid:
		return false, ReasonInvalidProbe, TruncateMessage(p.InvalidMessage)
	case !running:
		return false, ReasonContainerNotRunning, notRunningMessage(cs)
	case !started:
		return false, ReasonWaitingForStartup, waitingMsg
	case !p.Known || p.Result == results.Unknown || (p.Result == results.Failure && !p.Probed):
		return false, ReasonProbePending, "no probe result yet for the current container instance"
	case p.Result == results.Success:
		// A fixed text: pod status is readable by the pod's author, and a
		// success's body could be any internal endpoint's answer.
		return true, ReasonProbeSucceeded, succeededMessage
	default:
		return false, ReasonProbeFailed, TruncateMessage(p.Output)
	}
}

func notRunningMessage(cs *v1.ContainerStatus) string {
	switch {
	case cs == nil:
		return "container has no status yet"
	case cs.State.Waiting != nil && cs.State.Waiting.Reason != "":
		return TruncateMessage("container is waiting: " + cs.State.Waiting.Reason)
	case cs.State.Terminated != nil:
		t := cs.State.Terminated
		return TruncateMessage(fmt.Sprintf("container terminated: %s (exit code %d)", t.Reason, t.ExitCode))
	default:
		return "container is not running"
	}
}

// TruncateMessage makes s fit a condition message: invalid UTF-8 is replaced,
// surrounding white space trimmed, and the result cut to at most
// MaxMessageBytes bytes without splitting a character.
func TruncateMessage(s string) string {
	s = strings.TrimSpace(strings.ToValidUTF8(s, "\uFFFD"))
	if len(s) <= MaxMessageBytes {
		return s
	}
	cut := MaxMessageBytes
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut]
}

// sameSignificant reports whether a and b differ only in messages. Only
// status and reason changes are worth an API write.
func sameSignificant(a, b PodState) bool {
	if len(a.Containers) != len(b.Containers) || a.Generation != b.Generation {
		return false
	}
	for i := range a.Containers {
		x, y := a.Containers[i], b.Containers[i]
		x.ReadyMessage, x.StartedMessage = "", ""
		y.ReadyMessage, y.StartedMessage = "", ""
		if x != y {
			return false
		}
	}
	return true
}
