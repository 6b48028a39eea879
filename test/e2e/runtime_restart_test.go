//go:build e2e

package e2e

import (
	"context"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
)

// TestContainerdRestartUnderProbed is issue 11 item 8 on the real node:
// containerd is restarted (stopped with SIGTERM and started again, as an
// upgrade does) under a running probed. containerd creates a new socket when
// it starts; probed, deployed from deploy/ with the runtime's directory
// mounted, must follow it: its exec probes run again and a liveness kill
// goes through the runtime, all without probed itself restarting. With the
// socket file bind-mounted (the old manifest) every exec after the restart
// errors, is discarded, and the container is never killed.
func TestContainerdRestartUnderProbed(t *testing.T) {
	ctx := context.Background()
	_, before := probedPod(t)

	s := newSC(t, "runtime-restart", regular)
	pod := s.newPod("app", shell("touch /tmp/healthy; sleep 1000000"), probes{
		Liveness:  &v1.Probe{ProbeHandler: execHandler("cat", "/tmp/healthy"), PeriodSeconds: 1, FailureThreshold: 1},
		Readiness: &v1.Probe{ProbeHandler: execHandler("cat", "/tmp/healthy"), PeriodSeconds: 1},
	})
	s.create(pod)
	s.poll("ready through probed's exec probe", 500*time.Millisecond, podStartTimeout, func(p *v1.Pod) (bool, error) {
		return isReady(p), nil
	})

	began := time.Now()
	if err := nd.Containerd().Restart(ctx); err != nil {
		t.Fatalf("restarting containerd: %v", err)
	}
	s.note("containerd restarted in %v", time.Since(began).Round(100*time.Millisecond))

	// The kubelet follows the new socket on the host; kubectl exec goes
	// through it to remove the liveness file. probed's next exec probe must
	// then fail (not error) and probed must stop the container through the
	// restarted runtime.
	p := s.get()
	initial := s.restartCount(p)
	if out, err := kubectl(ctx, "exec", "-n", s.ns, s.podName, "-c", "app", "--", "rm", "/tmp/healthy"); err != nil {
		t.Fatalf("kubectl exec rm: %v: %s", err, out)
	}
	s.expectRestarts(initial, 1, 60*time.Second)
	s.expectEvent(v1.EventTypeNormal, "Killing", "Container app failed liveness probe, will be restarted")
	if ev := s.expectEvent(v1.EventTypeWarning, "Unhealthy", "Liveness probe failed:"); !strings.Contains(ev.Message, "/tmp/healthy") {
		t.Errorf("the failing probe's output is not the exec's: %q", ev.Message)
	}

	// The restarted container is ready again through probed's exec probe.
	s.poll("ready again after the restart", 500*time.Millisecond, podStartTimeout, func(p *v1.Pod) (bool, error) {
		return isReady(p) && s.restartCount(p) > initial, nil
	})
	_, after := probedPod(t)
	if after.ContainerID != before.ContainerID || after.RestartCount != before.RestartCount {
		t.Errorf("probed itself restarted (%s x%d -> %s x%d); it must follow containerd on its own",
			before.ContainerID, before.RestartCount, after.ContainerID, after.RestartCount)
	}
}
