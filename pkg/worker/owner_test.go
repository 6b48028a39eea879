package worker

import (
	"context"
	"testing"

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
