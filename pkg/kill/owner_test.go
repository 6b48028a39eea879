package kill

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/probed-dev/probed/pkg/cri"
	"github.com/probed-dev/probed/pkg/probespec"
)

// mismatchStopper says every container is another pod's.
type mismatchStopper struct{ log *killLog }

func (s mismatchStopper) StopContainer(_ context.Context, id string, _ time.Duration) error {
	s.log.add("stop %s", id)
	return nil
}

func (s mismatchStopper) CheckOwner(ctx context.Context, id string) error {
	o, _ := cri.OwnerFrom(ctx)
	return &cri.OwnerMismatchError{ContainerID: id, Want: o, Op: "stop"}
}

// A kill of a container ID that the runtime says is not the pod's is
// refused before anything happens: no Killing event, no preStop hook, no
// stop, and a Warning ContainerMismatch event on the pod instead.
func TestKillRefusedForAnotherPodsContainer(t *testing.T) {
	log := &killLog{}
	hooks := newGatedHooks(log)
	k := &RuntimeKiller{Runtime: mismatchStopper{log}, Hooks: hooks, Recorder: logRecorder{log}}
	ctx := cri.WithOwner(context.Background(), cri.Owner{PodNamespace: "ns", PodName: "p", PodUID: "u", Container: "app"})
	err := k.Kill(ctx, prestopPod(i64(10)), withPreStop(drainHook), "containerd://someone-else", probespec.Liveness, nil)
	var mismatch *cri.OwnerMismatchError
	if !errors.As(err, &mismatch) {
		t.Fatalf("Kill = %v, want an OwnerMismatchError", err)
	}
	checkSteps(t, log, `event app Warning ContainerMismatch: container ID containerd://someone-else from the pod's status is not container "app" of this pod on the container runtime; probed refuses to stop it`)
}
