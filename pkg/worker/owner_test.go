package worker

import (
	"context"
	"errors"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"

	"github.com/probed-dev/probed/pkg/cri"
	"github.com/probed-dev/probed/pkg/prober"
	"github.com/probed-dev/probed/pkg/probespec"
	"github.com/probed-dev/probed/pkg/results"
)

// ownerProber records the owner its calls' context carries.
type ownerProber struct {
	owners chan cri.Owner
}

func (p ownerProber) Probe(ctx context.Context, _ probespec.ProbeType, _ *v1.Probe, _ prober.Target, _ prober.EventSink) (results.Result, string, error) {
	o, _ := cri.OwnerFrom(ctx)
	p.owners <- o
	return results.Success, "", nil
}

// Every runtime call a worker makes carries the pod container it serves,
// which the runtime checks the container ID against; a mirror pod's
// carries its static pod's UID too.
func TestWorkerCallsCarryTheirOwner(t *testing.T) {
	owners := make(chan cri.Owner, 10)
	e, w := newEnv(t, probespec.Readiness, v1.Probe{}, func(c *Config) {
		c.Prober = ownerProber{owners: owners}
		c.StaticPodUID = "static-uid"
	})
	e.pods.set(runningPod(epoch))
	start(t, w)
	got := recv(t, owners, "a probe")
	want := cri.Owner{PodNamespace: testNamespace, PodName: testPodName, PodUID: string(testUID), StaticPodUID: "static-uid", Container: testContainer}
	if got != want {
		t.Errorf("the probe's owner = %+v, want %+v", got, want)
	}

	mirror := runningPod(epoch)
	mirror.Annotations = map[string]string{v1.MirrorPodAnnotationKey: "abc123"}
	if got := StaticPodUID(mirror); got != "abc123" {
		t.Errorf("StaticPodUID(mirror pod) = %q", got)
	}
	if got := StaticPodUID(runningPod(epoch)); got != "" {
		t.Errorf("StaticPodUID(pod) = %q", got)
	}
}

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
