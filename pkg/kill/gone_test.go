package kill

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/probed-dev/probed/pkg/cri"
	"github.com/probed-dev/probed/pkg/probespec"
)

// goneStopper is a runtime that no longer knows the container: from the
// owner check on (ownerGone), or only by the time of the stop.
type goneStopper struct {
	log       *killLog
	ownerGone bool
}

func (s goneStopper) CheckOwner(_ context.Context, id string) error {
	s.log.add("check %s", id)
	if s.ownerGone {
		return fmt.Errorf("container %s: %w", id, cri.ErrContainerNotFound)
	}
	return nil
}

func (s goneStopper) StopContainer(_ context.Context, id string, grace time.Duration) error {
	s.log.add("stop %s %v", id, grace)
	return fmt.Errorf("stop container %s: %w", id, cri.ErrContainerNotFound)
}

// Issue 31, 1: a liveness kill of a container the runtime no longer knows
// (it exited and was removed as its probe failed) goes as the kubelet's
// killContainer goes: the Killing event, then the stop, whose NotFound
// means done. It is no refusal (no ContainerMismatch) and no failure, so
// the worker does not retry it.
func TestKillOfAContainerAlreadyGone(t *testing.T) {
	for _, tc := range []struct {
		name      string
		ownerGone bool
	}{
		{"gone before the owner check", true},
		{"gone between the owner check and the stop", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			log := &killLog{}
			k := &RuntimeKiller{Runtime: goneStopper{log: log, ownerGone: tc.ownerGone}, Recorder: logRecorder{log}}
			if err := k.Kill(context.Background(), prestopPod(i64(10)), withPreStop(drainHook), "containerd://gone", probespec.Liveness, nil); err != nil {
				t.Fatalf("Kill = %v, want done", err)
			}
			checkSteps(t, log, "check containerd://gone", killingStep, "stop containerd://gone 10s")
		})
	}
}
