package status

import (
	"strings"
	"testing"
	"unicode/utf8"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/probed-dev/probed/pkg/results"
)

func running() *v1.ContainerStatus {
	return &v1.ContainerStatus{Name: "c", ContainerID: "containerd://1",
		State: v1.ContainerState{Running: &v1.ContainerStateRunning{StartedAt: metav1.Now()}}}
}

func waiting(reason string) *v1.ContainerStatus {
	return &v1.ContainerStatus{Name: "c", State: v1.ContainerState{Waiting: &v1.ContainerStateWaiting{Reason: reason}}}
}

func terminated() *v1.ContainerStatus {
	return &v1.ContainerStatus{Name: "c", State: v1.ContainerState{Terminated: &v1.ContainerStateTerminated{Reason: "Error", ExitCode: 2}}}
}

func known(r results.Result, out string) *ProbeInput {
	return &ProbeInput{Known: true, Probed: true, Result: r, Output: out}
}

func TestDerive(t *testing.T) {
	success := known(results.Success, " ok\n")
	failure := known(results.Failure, "HTTP probe failed with statuscode: 500")
	invalid := &ProbeInput{Invalid: true, InvalidMessage: "readinessProbe.httpGet.port: Invalid value: 0"}

	tests := []struct {
		name string
		in   ContainerInput
		want ContainerState
	}{{
		name: "liveness only, running: started and ready, no conditions",
		in:   ContainerInput{Name: "c", Status: running()},
		want: ContainerState{Name: "c", Started: true, Ready: true},
	}, {
		name: "liveness only, not running",
		in:   ContainerInput{Name: "c", Status: waiting("ContainerCreating")},
		want: ContainerState{Name: "c"},
	}, {
		name: "readiness success",
		in:   ContainerInput{Name: "c", Status: running(), Readiness: success},
		want: ContainerState{Name: "c", Started: true, HasReadiness: true, Ready: true, ReadyReason: ReasonProbeSucceeded, ReadyMessage: succeededMessage},
	}, {
		name: "readiness failure",
		in:   ContainerInput{Name: "c", Status: running(), Readiness: failure},
		want: ContainerState{Name: "c", Started: true, HasReadiness: true, ReadyReason: ReasonProbeFailed, ReadyMessage: failure.Output},
	}, {
		name: "readiness not known yet",
		in:   ContainerInput{Name: "c", Status: running(), Readiness: &ProbeInput{Result: results.Success}},
		want: ContainerState{Name: "c", Started: true, HasReadiness: true, ReadyReason: ReasonProbePending, ReadyMessage: "no probe result yet for the current container instance"},
	}, {
		// The kubelet's initial Failure of a new instance is no probe's
		// verdict: pending, not failed, and without anyone's text.
		name: "readiness initial failure, no probe yet",
		in:   ContainerInput{Name: "c", Status: running(), Readiness: &ProbeInput{Known: true, Result: results.Failure}},
		want: ContainerState{Name: "c", Started: true, HasReadiness: true, ReadyReason: ReasonProbePending, ReadyMessage: "no probe result yet for the current container instance"},
	}, {
		// A success never publishes what the probe returned.
		name: "readiness success with a body",
		in:   ContainerInput{Name: "c", Status: running(), Readiness: known(results.Success, `{"secret":"internal answer"}`)},
		want: ContainerState{Name: "c", Started: true, HasReadiness: true, Ready: true, ReadyReason: ReasonProbeSucceeded, ReadyMessage: succeededMessage},
	}, {
		name: "readiness unknown result",
		in:   ContainerInput{Name: "c", Status: running(), Readiness: known(results.Unknown, "")},
		want: ContainerState{Name: "c", Started: true, HasReadiness: true, ReadyReason: ReasonProbePending, ReadyMessage: "no probe result yet for the current container instance"},
	}, {
		name: "readiness, container waiting",
		in:   ContainerInput{Name: "c", Status: waiting("CrashLoopBackOff"), Readiness: success},
		want: ContainerState{Name: "c", HasReadiness: true, ReadyReason: ReasonContainerNotRunning, ReadyMessage: "container is waiting: CrashLoopBackOff"},
	}, {
		name: "readiness, container waiting without reason",
		in:   ContainerInput{Name: "c", Status: waiting(""), Readiness: success},
		want: ContainerState{Name: "c", HasReadiness: true, ReadyReason: ReasonContainerNotRunning, ReadyMessage: "container is not running"},
	}, {
		name: "readiness, container terminated",
		in:   ContainerInput{Name: "c", Status: terminated(), Readiness: success},
		want: ContainerState{Name: "c", HasReadiness: true, ReadyReason: ReasonContainerNotRunning, ReadyMessage: "container terminated: Error (exit code 2)"},
	}, {
		name: "readiness, no status yet",
		in:   ContainerInput{Name: "c", Readiness: success},
		want: ContainerState{Name: "c", HasReadiness: true, ReadyReason: ReasonContainerNotRunning, ReadyMessage: "container has no status yet"},
	}, {
		name: "invalid readiness probe wins over everything",
		in:   ContainerInput{Name: "c", Readiness: invalid},
		want: ContainerState{Name: "c", HasReadiness: true, ReadyReason: ReasonInvalidProbe, ReadyMessage: invalid.InvalidMessage},
	}, {
		name: "invalid readiness probe, running",
		in:   ContainerInput{Name: "c", Status: running(), Readiness: invalid},
		want: ContainerState{Name: "c", Started: true, HasReadiness: true, ReadyReason: ReasonInvalidProbe, ReadyMessage: invalid.InvalidMessage},
	}, {
		name: "startup success, readiness success",
		in:   ContainerInput{Name: "c", Status: running(), Startup: known(results.Success, ""), Readiness: success},
		want: ContainerState{Name: "c", HasStartup: true, Started: true, StartedReason: ReasonProbeSucceeded, StartedMessage: succeededMessage,
			HasReadiness: true, Ready: true, ReadyReason: ReasonProbeSucceeded, ReadyMessage: succeededMessage},
	}, {
		name: "startup pending: readiness waits for startup",
		in:   ContainerInput{Name: "c", Status: running(), Startup: &ProbeInput{}, Readiness: success},
		want: ContainerState{Name: "c", HasStartup: true, StartedReason: ReasonProbePending, StartedMessage: "no probe result yet for the current container instance",
			HasReadiness: true, ReadyReason: ReasonWaitingForStartup, ReadyMessage: "waiting for the startup probe to succeed (ProbePending)"},
	}, {
		name: "startup failed: readiness waits for startup",
		in:   ContainerInput{Name: "c", Status: running(), Startup: known(results.Failure, "connection refused"), Readiness: success},
		want: ContainerState{Name: "c", HasStartup: true, StartedReason: ReasonProbeFailed, StartedMessage: "connection refused",
			HasReadiness: true, ReadyReason: ReasonWaitingForStartup, ReadyMessage: "waiting for the startup probe to succeed (ProbeFailed)"},
	}, {
		name: "startup only, succeeded: ready without readiness probe",
		in:   ContainerInput{Name: "c", Status: running(), Startup: known(results.Success, "")},
		want: ContainerState{Name: "c", HasStartup: true, Started: true, StartedReason: ReasonProbeSucceeded, StartedMessage: succeededMessage, Ready: true},
	}, {
		name: "startup only, failed: not ready",
		in:   ContainerInput{Name: "c", Status: running(), Startup: known(results.Failure, "")},
		want: ContainerState{Name: "c", HasStartup: true, StartedReason: ReasonProbeFailed},
	}, {
		name: "startup, container not running",
		in:   ContainerInput{Name: "c", Status: terminated(), Startup: known(results.Success, "")},
		want: ContainerState{Name: "c", HasStartup: true, StartedReason: ReasonContainerNotRunning, StartedMessage: "container terminated: Error (exit code 2)"},
	}, {
		name: "invalid startup probe: never started, readiness waits",
		in:   ContainerInput{Name: "c", Status: running(), Startup: &ProbeInput{Invalid: true, InvalidMessage: "bad"}, Readiness: success},
		want: ContainerState{Name: "c", HasStartup: true, StartedReason: ReasonInvalidProbe, StartedMessage: "bad",
			HasReadiness: true, ReadyReason: ReasonWaitingForStartup, ReadyMessage: "waiting for the startup probe to succeed (InvalidProbe)"},
	}}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := Derive([]ContainerInput{tc.in})
			if len(got.Containers) != 1 {
				t.Fatalf("got %d containers, want 1", len(got.Containers))
			}
			if got.Containers[0] != tc.want {
				t.Errorf("Derive:\n got %+v\nwant %+v", got.Containers[0], tc.want)
			}
		})
	}
}

func TestDeriveKeepsOrderAndEmpty(t *testing.T) {
	if got := Derive(nil); len(got.Containers) != 0 {
		t.Errorf("Derive(nil) = %+v, want no containers", got)
	}
	got := Derive([]ContainerInput{{Name: "b"}, {Name: "a"}})
	if got.Containers[0].Name != "b" || got.Containers[1].Name != "a" {
		t.Errorf("order not kept: %+v", got)
	}
}

func TestTruncateMessage(t *testing.T) {
	ascii := strings.Repeat("a", 2000)
	if got := TruncateMessage(ascii); len(got) != MaxMessageBytes {
		t.Errorf("ascii: got %d bytes, want %d", len(got), MaxMessageBytes)
	}
	// "é" is two bytes: 1023 ASCII bytes then "é" would straddle the limit.
	straddle := strings.Repeat("a", 1023) + "é" + "tail"
	got := TruncateMessage(straddle)
	if len(got) != 1023 || !utf8.ValidString(got) {
		t.Errorf("straddling rune: got %d bytes (valid=%t), want 1023 valid", len(got), utf8.ValidString(got))
	}
	// A four-byte rune ending exactly at the limit is kept.
	exact := strings.Repeat("a", 1020) + "😀" + "more"
	if got := TruncateMessage(exact); got != strings.Repeat("a", 1020)+"😀" {
		t.Errorf("exact fit: got %d bytes", len(got))
	}
	// All multi-byte.
	wide := strings.Repeat("世", 500)
	got = TruncateMessage(wide)
	if len(got) > MaxMessageBytes || !utf8.ValidString(got) || len(got) != 1023 {
		t.Errorf("wide: got %d bytes (valid=%t)", len(got), utf8.ValidString(got))
	}
	if got := TruncateMessage("  short \n"); got != "short" {
		t.Errorf("trim: got %q", got)
	}
	if got := TruncateMessage("bad\xffbyte"); got != "bad\uFFFDbyte" {
		t.Errorf("invalid UTF-8: got %q", got)
	}
	// Invalid bytes are replaced before cutting, so the result is still capped.
	junk := strings.Repeat("\xff", 1000)
	if got := TruncateMessage(junk); len(got) > MaxMessageBytes || !utf8.ValidString(got) {
		t.Errorf("junk: got %d bytes (valid=%t)", len(got), utf8.ValidString(got))
	}
}

func TestDeriveTruncatesOutput(t *testing.T) {
	out := strings.Repeat("x", 1023) + "ü" + "y"
	got := Derive([]ContainerInput{{Name: "c", Status: running(), Readiness: known(results.Failure, out)}})
	msg := got.Containers[0].ReadyMessage
	if len(msg) != 1023 || !utf8.ValidString(msg) {
		t.Errorf("got %d bytes (valid=%t), want 1023", len(msg), utf8.ValidString(msg))
	}
}

func TestSameSignificant(t *testing.T) {
	a := PodState{Containers: []ContainerState{{Name: "c", HasReadiness: true, ReadyReason: ReasonProbeFailed, ReadyMessage: "one"}}}
	b := PodState{Containers: []ContainerState{{Name: "c", HasReadiness: true, ReadyReason: ReasonProbeFailed, ReadyMessage: "two"}}}
	if !sameSignificant(a, b) {
		t.Error("message-only change counted as significant")
	}
	b.Containers[0].ReadyReason = ReasonContainerNotRunning
	if sameSignificant(a, b) {
		t.Error("reason change not counted")
	}
	if sameSignificant(a, PodState{}) {
		t.Error("container set change not counted")
	}
}
