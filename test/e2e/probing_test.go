//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"net/url"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apimachinery/pkg/watch"
)

const (
	// probeTestInitialDelaySeconds and defaultObservationTimeout are upstream's.
	probeTestInitialDelaySeconds = 15
	defaultObservationTimeout    = 4 * time.Minute

	normal  = v1.EventTypeNormal
	warning = v1.EventTypeWarning
)

// scenario is one upstream "Probing container" test, run once with the probed
// container as the pod's container and once as a sidecar.
type scenario struct {
	name string
	run  func(s *sc)
}

// TestProbing runs every scenario, for both placements, and the demo, all in
// parallel; then it checks that probed itself came through unharmed.
func TestProbing(t *testing.T) {
	t.Run("scenarios", func(t *testing.T) {
		for _, place := range []placement{regular, sidecar} {
			t.Run(place.String(), func(t *testing.T) {
				t.Parallel()
				for _, sn := range scenarios {
					t.Run(sn.name, func(t *testing.T) {
						t.Parallel()
						sn.run(newSC(t, sn.name, place))
					})
				}
			})
		}
		t.Run("demo", func(t *testing.T) {
			t.Parallel()
			testDemo(t)
		})
		t.Run("parity", func(t *testing.T) {
			t.Parallel()
			for _, sn := range parityScenarios {
				t.Run(sn.name, func(t *testing.T) {
					t.Parallel()
					sn.run(t)
				})
			}
		})
	})
	t.Run("probed-stayed-up", testProbedStayedUp)
}

// killingMsg is the kubelet's Killing text for a probe failure of the
// scenario's container: for a regular container "Container <c> failed
// liveness probe, will be restarted"; for a restartable init container the
// kubelet (computeInitContainerActions) says "Init container <c> failed
// liveness probe".
func (s *sc) killingMsg(probe string) string {
	if s.place == sidecar {
		return fmt.Sprintf("Init container %s failed %s probe", s.container, probe)
	}
	return fmt.Sprintf("Container %s failed %s probe, will be restarted", s.container, probe)
}

var scenarios = []scenario{
	// 1. "with readiness probe should not be ready before initial delay and never restart"
	{"01-readiness-initial-delay", func(s *sc) {
		pod := s.newPod("test-webserver", target([]int32{80}, "--http=:80"), probes{
			Readiness: &v1.Probe{ProbeHandler: httpGetHandler("/", 80), InitialDelaySeconds: probeTestInitialDelaySeconds},
		})
		s.create(pod)
		p := s.poll("pod Ready", time.Second, podStartTimeout, func(p *v1.Pod) (bool, error) { return isReady(p), nil })
		cs := s.status(p)
		if cs == nil || cs.State.Running == nil {
			s.t.Fatalf("container not running: %s", summarize(p))
		}
		started := cs.State.Running.StartedAt.Time
		readyAt := condition(p, string(v1.PodReady)).LastTransitionTime.Time
		gateAt := condition(p, s.readyCond()).LastTransitionTime.Time
		s.note("container started %s, %s True at %s, pod Ready at %s: ready %v after start (initial delay %ds)",
			started.Format("15:04:05"), s.readyCond(), gateAt.Format("15:04:05"), readyAt.Format("15:04:05"),
			readyAt.Sub(started), probeTestInitialDelaySeconds)
		if readyAt.Sub(started) < probeTestInitialDelaySeconds*time.Second {
			s.t.Errorf("pod became ready %v after the container started, before its %ds initial delay", readyAt.Sub(started), probeTestInitialDelaySeconds)
		}
		if c := condition(p, s.readyCond()); c.Status != v1.ConditionTrue || c.Reason != "ProbeSucceeded" {
			s.t.Errorf("%s = %s (%s), want True (ProbeSucceeded)", s.readyCond(), c.Status, c.Reason)
		}
		if rc := s.restartCount(p); rc != 0 {
			s.t.Errorf("restart count %d, want 0", rc)
		}
		s.expectNoProbedEvent("Unhealthy", "")
	}},

	// 2. "with readiness probe that fails should never be ready and never restart"
	{"02-readiness-failing", func(s *sc) {
		pod := s.newPod("test-webserver", target([]int32{80}, "--http=:80"), probes{
			Readiness: &v1.Probe{ProbeHandler: httpGetHandler("/", 81)},
		})
		s.create(pod)
		s.waitContainerStarted()
		p := s.observe("pod not Ready", time.Second, observeReadiness, func(p *v1.Pod) error {
			if isReady(p) {
				return fmt.Errorf("pod is Ready")
			}
			return nil
		})
		s.note("not Ready for %v", observeReadiness)
		if c := condition(p, s.readyCond()); c == nil || c.Status != v1.ConditionFalse || c.Reason != "ProbeFailed" {
			s.t.Errorf("%s = %+v, want False (ProbeFailed)", s.readyCond(), c)
		}
		if st := condStatus(p, gateCondition); st != v1.ConditionFalse {
			s.t.Errorf("%s = %s, want False", gateCondition, st)
		}
		if rc := s.restartCount(p); rc != 0 {
			s.t.Errorf("restart count %d, want 0", rc)
		}
		e := s.expectEvent(warning, "Unhealthy", "Readiness probe failed: ")
		if !strings.Contains(e.Message, `:81/": dial tcp `) || !strings.Contains(e.Message, "connect: connection refused") {
			s.t.Errorf("Unhealthy message %q, want the kubelet's %q", e.Message, `Readiness probe failed: Get "http://<ip>:81/": dial tcp <ip>:81: connect: connection refused`)
		}
		s.expectNoProbedEvent("Killing", "")
	}},

	// 3. "should be restarted with a exec "cat /tmp/health" liveness probe"
	{"03-exec-liveness-restarted", func(s *sc) {
		pod := s.newPod("busybox", shell("echo ok >/tmp/health; sleep 10; rm -rf /tmp/health; sleep 600"), probes{
			Liveness: &v1.Probe{ProbeHandler: execHandler("cat", "/tmp/health"), InitialDelaySeconds: 15, TimeoutSeconds: 5, FailureThreshold: 1},
		})
		s.runLivenessTest(pod, 1, defaultObservationTimeout)
		s.expectEvent(warning, "Unhealthy", "Liveness probe failed: cat: can't open '/tmp/health': No such file or directory")
		s.expectEvent(normal, "Killing", s.killingMsg("liveness"))
	}},
	// 3. "should *not* be restarted with a exec "cat /tmp/health" liveness probe"
	{"03-exec-liveness-not-restarted", func(s *sc) {
		pod := s.newPod("busybox", shell("echo ok >/tmp/health; sleep 600"), probes{
			Liveness: &v1.Probe{ProbeHandler: execHandler("cat", "/tmp/health"), InitialDelaySeconds: 15, TimeoutSeconds: 5, FailureThreshold: 1},
		})
		s.runLivenessTest(pod, 0, 0)
		s.expectNoProbedEvent("Unhealthy", "")
	}},

	// 4. "should be restarted with a /healthz http liveness probe"
	{"04-http-liveness-restarted", func(s *sc) {
		pod := s.newPod("liveness", target([]int32{8080}, "--http=:8080", "--healthz-fail-after=10s"), probes{
			Liveness: &v1.Probe{ProbeHandler: httpGetHandler("/healthz", 8080), InitialDelaySeconds: 15, FailureThreshold: 1},
		})
		s.runLivenessTest(pod, 1, defaultObservationTimeout)
		s.expectEvent(warning, "Unhealthy", "Liveness probe failed: HTTP probe failed with statuscode: 500")
		s.expectEvent(normal, "Killing", s.killingMsg("liveness"))
	}},
	// 4. "should *not* be restarted with a /healthz http liveness probe"
	{"04-http-liveness-not-restarted", func(s *sc) {
		pod := s.newPod("liveness", target([]int32{8080}, "--http=:8080"), probes{
			Liveness: &v1.Probe{ProbeHandler: httpGetHandler("/healthz", 8080), InitialDelaySeconds: 15, TimeoutSeconds: 5, FailureThreshold: 5},
		})
		s.runLivenessTest(pod, 0, 0)
		s.expectNoProbedEvent("Unhealthy", "")
	}},

	// 5. "should *not* be restarted with a tcp:8080 liveness probe": /healthz
	// turns 500 after 10 s, but the socket stays open.
	{"05-tcp-liveness-not-restarted", func(s *sc) {
		pod := s.newPod("liveness", target([]int32{8080}, "--http=:8080", "--healthz-fail-after=10s"), probes{
			Liveness: &v1.Probe{ProbeHandler: tcpSocketHandler(8080), InitialDelaySeconds: 15, TimeoutSeconds: 5, FailureThreshold: 1},
		})
		s.runLivenessTest(pod, 0, 0)
		s.expectNoProbedEvent("Unhealthy", "")
	}},

	// 6. "should have monotonically increasing restart count"
	{"06-restart-count-monotonic", func(s *sc) {
		pod := s.newPod("liveness", target([]int32{8080}, "--http=:8080", "--healthz-fail-after=10s"), probes{
			Liveness: &v1.Probe{ProbeHandler: httpGetHandler("/healthz", 8080), InitialDelaySeconds: 5, FailureThreshold: 1},
		})
		// Upstream allows 2m of back-off + 4m + 2m per restart; the kubelet's
		// crash back-off (10s, 20s, 40s, 80s) alone is 150s.
		s.runLivenessTest(pod, 5, 8*time.Minute)
		s.expectEvent(normal, "Killing", s.killingMsg("liveness"))
		// Every restart was probed's doing: one Killing per restart (aggregated into a count).
		var n int32
		_ = wait.PollUntilContextTimeout(s.ctx, time.Second, eventTimeout, true, func(context.Context) (bool, error) {
			n = s.eventCount("Killing", s.killingMsg("liveness"))
			return n >= 5, nil
		})
		s.note("Killing events counted %d", n)
		if n < 5 {
			s.t.Errorf("Killing events counted %d times, want at least 5 (one per restart)", n)
		}
	}},

	// 7. "should be restarted with an exec liveness probe with timeout"
	{"07-exec-liveness-timeout-restarted", func(s *sc) {
		pod := s.newPod("busybox", shell("sleep 600"), probes{
			Liveness: &v1.Probe{ProbeHandler: execHandler("/bin/sh", "-c", "sleep 10"), InitialDelaySeconds: 15, TimeoutSeconds: 1, FailureThreshold: 1},
		})
		s.runLivenessTest(pod, 1, defaultObservationTimeout)
		e := s.expectEvent(warning, "Unhealthy", "Liveness probe failed: ")
		if !strings.Contains(e.Message, "timed out") {
			s.t.Errorf("Unhealthy message %q does not say the command timed out", e.Message)
		}
		s.expectEvent(normal, "Killing", s.killingMsg("liveness"))
	}},
	// 7. "should be restarted with a failing exec liveness probe that took longer than the timeout"
	{"07-exec-liveness-failing-slow-restarted", func(s *sc) {
		pod := s.newPod("busybox", shell("sleep 600"), probes{
			Liveness: &v1.Probe{ProbeHandler: execHandler("/bin/sh", "-c", "sleep 10 & exit 1"), InitialDelaySeconds: 15, TimeoutSeconds: 1, FailureThreshold: 1},
		})
		s.runLivenessTest(pod, 1, defaultObservationTimeout)
		s.expectEvent(warning, "Unhealthy", "Liveness probe failed: ")
		s.expectEvent(normal, "Killing", s.killingMsg("liveness"))
	}},

	// 8. "should not be ready with an exec readiness probe timeout"
	{"08-exec-readiness-timeout-not-ready", func(s *sc) {
		pod := s.newPod("busybox", shell("sleep 600"), probes{
			Readiness: &v1.Probe{ProbeHandler: execHandler("/bin/sh", "-c", "sleep 10"), InitialDelaySeconds: 15, TimeoutSeconds: 1, FailureThreshold: 1},
		})
		s.create(pod)
		s.waitContainerStarted()
		p := s.observe("pod not Ready", 2*time.Second, observeReadiness, func(p *v1.Pod) error {
			if isReady(p) {
				return fmt.Errorf("pod is Ready")
			}
			return nil
		})
		s.note("not Ready for %v", observeReadiness)
		if c := condition(p, s.readyCond()); c == nil || c.Status != v1.ConditionFalse {
			s.t.Errorf("%s = %+v, want False", s.readyCond(), c)
		}
		e := s.expectEvent(warning, "Unhealthy", "Readiness probe failed: ")
		if !strings.Contains(e.Message, "timed out") {
			s.t.Errorf("Unhealthy message %q does not say the command timed out", e.Message)
		}
		if rc := s.restartCount(p); rc != 0 {
			s.t.Errorf("restart count %d, want 0", rc)
		}
	}},

	// 9. "should be restarted with a local redirect http liveness probe"
	{"09-local-redirect-restarted", func(s *sc) {
		pod := s.newPod("liveness", target([]int32{8080}, "--http=:8080", "--healthz-fail-after=10s"), probes{
			Liveness: &v1.Probe{ProbeHandler: httpGetHandler("/redirect?loc="+url.QueryEscape("/healthz"), 8080), InitialDelaySeconds: 15, FailureThreshold: 1},
		})
		s.runLivenessTest(pod, 1, defaultObservationTimeout)
		s.expectEvent(warning, "Unhealthy", "Liveness probe failed: HTTP probe failed with statuscode: 500")
		s.expectEvent(normal, "Killing", s.killingMsg("liveness"))
	}},
	// 9. "should *not* be restarted with a non-local redirect http liveness probe"
	{"09-nonlocal-redirect-not-restarted", func(s *sc) {
		pod := s.newPod("liveness", target([]int32{8080}, "--http=:8080", "--healthz-fail-after=10s"), probes{
			// TimeoutSeconds 5, as the other "not restarted" scenarios: the
			// redirect is the subject, and a 1 s timeout on a loaded node is not.
			Liveness: &v1.Probe{ProbeHandler: httpGetHandler("/redirect?loc="+url.QueryEscape("http://0.0.0.0/"), 8080), InitialDelaySeconds: 15, TimeoutSeconds: 5, FailureThreshold: 1},
		})
		s.runLivenessTest(pod, 0, 0)
		s.expectEvent(warning, "ProbeWarning", `Liveness probe warning: Probe terminated redirects, Response body: <a href="http://0.0.0.0/">Found</a>.`)
		s.expectNoProbedEvent("Unhealthy", "")
	}},

	// 10. "should be restarted startup probe fails"
	{"10-startup-failing-restarted", func(s *sc) {
		pod := s.newPod("busybox", shell("sleep 600"), probes{
			Liveness: &v1.Probe{ProbeHandler: execHandler("/bin/true"), InitialDelaySeconds: 15, FailureThreshold: 1},
			Startup:  &v1.Probe{ProbeHandler: execHandler("/bin/false"), InitialDelaySeconds: 15, FailureThreshold: 3},
		})
		s.create(pod)
		p := s.waitContainerStarted()
		initial := s.restartCount(p)
		// 15s delay + 3 failures × 10s is 45s, but on a loaded node a probe
		// can be discarded (no exec slot free, as the kubelet discards a
		// probe error), and each discard costs a period.
		s.poll(s.startedCond()+"=False (ProbeFailed)", time.Second, defaultObservationTimeout, func(p *v1.Pod) (bool, error) {
			c := condition(p, s.startedCond())
			return c != nil && c.Status == v1.ConditionFalse && c.Reason == "ProbeFailed", nil
		})
		s.expectRestarts(initial, 1, defaultObservationTimeout)
		s.expectEvent(warning, "Unhealthy", "Startup probe failed: ")
		s.expectEvent(normal, "Killing", s.killingMsg("startup"))
		s.expectNoProbedEvent("Killing", "failed liveness probe")
	}},

	// 11. "should *not* be restarted by liveness probe because startup probe delays it"
	{"11-startup-delays-liveness", func(s *sc) {
		pod := s.newPod("busybox", shell("sleep 600"), probes{
			Liveness: &v1.Probe{ProbeHandler: execHandler("/bin/false"), InitialDelaySeconds: 15, FailureThreshold: 1},
			Startup:  &v1.Probe{ProbeHandler: execHandler("/bin/false"), InitialDelaySeconds: 15, FailureThreshold: 60},
		})
		p := s.runLivenessTest(pod, 0, 0)
		if c := condition(p, s.startedCond()); c == nil || c.Status != v1.ConditionFalse {
			s.t.Errorf("%s = %+v, want False", s.startedCond(), c)
		}
		if isReady(p) {
			s.t.Errorf("pod is Ready before its startup probe succeeded")
		}
		s.expectEvent(warning, "Unhealthy", "Startup probe failed: ")
		s.expectNoProbedEvent("Unhealthy", "Liveness probe")
	}},
	// 11. "should be restarted by liveness probe after startup probe enables it"
	{"11-liveness-after-startup-restarted", func(s *sc) {
		pod := s.newPod("busybox", shell("sleep 10; echo ok >/tmp/startup; sleep 600"), probes{
			Liveness: &v1.Probe{ProbeHandler: execHandler("/bin/false"), InitialDelaySeconds: 15, FailureThreshold: 1},
			Startup:  &v1.Probe{ProbeHandler: execHandler("cat", "/tmp/startup"), InitialDelaySeconds: 15, FailureThreshold: 60},
		})
		s.runLivenessTest(pod, 1, defaultObservationTimeout)
		s.expectEvent(warning, "Unhealthy", "Liveness probe failed: ")
		s.expectEvent(normal, "Killing", s.killingMsg("liveness"))
		s.expectNoProbedEvent("Killing", "failed startup probe")
	}},

	// 12. "should be ready immediately after startupProbe succeeds"
	{"12-ready-right-after-startup", func(s *sc) {
		pod := s.newPod("busybox", shell("echo ok >/tmp/health; sleep 32; echo ok >/tmp/startup; sleep 600"), probes{
			// Upstream leaves timeoutSeconds at 1s. A readiness probe that
			// times out on a busy node would wait a whole 30s period and
			// spoil what is measured here, so both get 5s.
			Readiness: &v1.Probe{ProbeHandler: execHandler("/bin/cat", "/tmp/health"), PeriodSeconds: 30, TimeoutSeconds: 5},
			Startup:   &v1.Probe{ProbeHandler: execHandler("/bin/cat", "/tmp/startup"), FailureThreshold: 120, PeriodSeconds: 5, TimeoutSeconds: 5},
		})
		s.create(pod)
		s.waitContainerStarted()
		// The kubelet's containerStatuses[].started knows nothing of probed's
		// startup probe; probed's started.probed.io/<c> is the startup result.
		var startedSeen, readySeen time.Time
		p := s.poll("pod Ready", 250*time.Millisecond, podStartTimeout, func(p *v1.Pod) (bool, error) {
			started := condStatus(p, s.startedCond()) == v1.ConditionTrue
			if started && startedSeen.IsZero() {
				startedSeen = time.Now()
			}
			if isReady(p) {
				readySeen = time.Now()
				if !started {
					return false, fmt.Errorf("pod Ready while %s is %s", s.startedCond(), condStatus(p, s.startedCond()))
				}
				return true, nil
			}
			return false, nil
		})
		startedAt := condition(p, s.startedCond()).LastTransitionTime.Time
		readyAt := condition(p, string(v1.PodReady)).LastTransitionTime.Time
		readyIn := readyAt.Sub(startedAt)
		s.note("startup succeeded at %s, pod Ready at %s: %v after (observed %v); readiness period 30s",
			startedAt.Format("15:04:05"), readyAt.Format("15:04:05"), readyIn, readySeen.Sub(startedSeen).Round(10*time.Millisecond))
		if readyIn < -time.Second {
			s.t.Errorf("pod became ready %v before the startup probe succeeded", -readyIn)
		}
		// Upstream allows 25s; the readiness probe must run as soon as
		// startup succeeds, not at its next 30s period.
		if readyIn > 10*time.Second {
			s.t.Errorf("pod became ready %v after the startup probe succeeded: readiness was not probed right after startup", readyIn)
		}
		if cs := s.status(p); cs == nil || cs.RestartCount != 0 {
			s.t.Errorf("container restarted: %s", summarize(p))
		}
	}},

	// 13. "should override timeoutGracePeriodSeconds when LivenessProbe field is set"
	{"13-liveness-grace-period-override", func(s *sc) {
		pod := s.newPod("busybox", shell("sleep 1000"), probes{
			// Fails: nothing listens on 8080.
			Liveness: &v1.Probe{ProbeHandler: httpGetHandler("/healthz", 8080), InitialDelaySeconds: 10, FailureThreshold: 1,
				TerminationGracePeriodSeconds: ptr(int64(5))},
		})
		pod.Spec.TerminationGracePeriodSeconds = ptr(int64(500))
		// 10s delay + 10s period + 5s grace = 25s, far below the pod's 500s.
		p := s.runLivenessTest(pod, 1, 40*time.Second+defaultObservationTimeout)
		kill := s.expectEvent(normal, "Killing", s.killingMsg("liveness"))
		s.expectKilledWithin(p, kill, 5)
	}},
	// 13. "should override timeoutGracePeriodSeconds when StartupProbe field is set"
	{"13-startup-grace-period-override", func(s *sc) {
		pod := s.newPod("busybox", shell("sleep 1000"), probes{
			Liveness: &v1.Probe{ProbeHandler: execHandler("/bin/true"), InitialDelaySeconds: 15, FailureThreshold: 1},
			Startup: &v1.Probe{ProbeHandler: execHandler("/bin/cat", "/tmp/startup"), InitialDelaySeconds: 10, FailureThreshold: 1,
				TerminationGracePeriodSeconds: ptr(int64(5))},
		})
		pod.Spec.TerminationGracePeriodSeconds = ptr(int64(500))
		p := s.runLivenessTest(pod, 1, 40*time.Second+defaultObservationTimeout)
		kill := s.expectEvent(normal, "Killing", s.killingMsg("startup"))
		s.expectKilledWithin(p, kill, 5)
	}},

	// 14. "should *not* be restarted with a GRPC liveness probe"
	{"14-grpc-liveness-not-restarted", func(s *sc) {
		pod := s.newPod("grpc", target([]int32{5000, 8080}, "--http=:8080", "--grpc=:5000"), probes{
			Liveness: &v1.Probe{ProbeHandler: grpcHandler(5000), InitialDelaySeconds: probeTestInitialDelaySeconds, TimeoutSeconds: 5, FailureThreshold: 1},
		})
		s.runLivenessTest(pod, 0, 0)
		s.expectNoProbedEvent("Unhealthy", "")
	}},
	// 14. "should be restarted with a GRPC liveness probe" (wrong port)
	{"14-grpc-liveness-wrong-port-restarted", func(s *sc) {
		pod := s.newPod("grpc", target([]int32{5000, 8080}, "--http=:8080", "--grpc=:5000"), probes{
			Liveness: &v1.Probe{ProbeHandler: grpcHandler(2333), InitialDelaySeconds: probeTestInitialDelaySeconds * 4, TimeoutSeconds: 5, FailureThreshold: 1},
		})
		s.runLivenessTest(pod, 1, defaultObservationTimeout)
		e := s.expectEvent(warning, "Unhealthy", "Liveness probe failed: ")
		if !strings.Contains(e.Message, ":2333") {
			s.t.Errorf("Unhealthy message %q does not name the port probed", e.Message)
		}
		s.expectEvent(normal, "Killing", s.killingMsg("liveness"))
	}},

	// 14a. Upstream's gRPC TLS specs (1.37, KEP-4939, alpha upstream; probed
	// reads grpc.mode from the typed API and needs no gate).
	// "should *not* be restarted with a GRPC liveness probe with TLS mode"
	{"14a-grpc-tls-liveness-not-restarted", func(s *sc) {
		pod := s.newPod("grpc", target([]int32{5000, 8080}, "--http=:8080", "--grpc=:5000", "--grpc-tls"), probes{
			Liveness: &v1.Probe{ProbeHandler: grpcTLSHandler(5000), InitialDelaySeconds: probeTestInitialDelaySeconds, TimeoutSeconds: 5, FailureThreshold: 1},
		})
		s.runLivenessTest(pod, 0, 0)
		s.expectNoProbedEvent("Unhealthy", "")
	}},
	// "should be restarted with a GRPC liveness probe when not using TLS against a TLS server"
	{"14a-grpc-plaintext-against-tls-restarted", func(s *sc) {
		pod := s.newPod("grpc", target([]int32{5000, 8080}, "--http=:8080", "--grpc=:5000", "--grpc-tls"), probes{
			Liveness: &v1.Probe{ProbeHandler: grpcHandler(5000), InitialDelaySeconds: probeTestInitialDelaySeconds, TimeoutSeconds: 5, FailureThreshold: 1},
		})
		s.runLivenessTest(pod, 1, defaultObservationTimeout)
		s.expectEvent(warning, "Unhealthy", "Liveness probe failed: ")
		s.expectEvent(normal, "Killing", s.killingMsg("liveness"))
	}},
	// "should be restarted with a GRPC liveness probe with TLS mode when endpoint returns not healthy"
	// (agnhost's --delay-unhealthy-sec 20 is probe-target's --healthz-fail-after, which gRPC service "" follows)
	{"14a-grpc-tls-not-serving-restarted", func(s *sc) {
		pod := s.newPod("grpc", target([]int32{5000, 8080}, "--http=:8080", "--grpc=:5000", "--grpc-tls", "--healthz-fail-after=20s"), probes{
			Liveness: &v1.Probe{ProbeHandler: grpcTLSHandler(5000), InitialDelaySeconds: probeTestInitialDelaySeconds, TimeoutSeconds: 5, FailureThreshold: 1},
		})
		s.runLivenessTest(pod, 1, defaultObservationTimeout)
		s.expectEvent(warning, "Unhealthy", "Liveness probe failed: service unhealthy (responded with \"NOT_SERVING\")")
		s.expectEvent(normal, "Killing", s.killingMsg("liveness"))
	}},
	// "should be restarted with a GRPC liveness probe with TLS mode on wrong port"
	{"14a-grpc-tls-wrong-port-restarted", func(s *sc) {
		pod := s.newPod("grpc", target([]int32{5000, 8080}, "--http=:8080", "--grpc=:5000", "--grpc-tls"), probes{
			Liveness: &v1.Probe{ProbeHandler: grpcTLSHandler(2333), InitialDelaySeconds: probeTestInitialDelaySeconds * 4, TimeoutSeconds: 5, FailureThreshold: 1},
		})
		s.runLivenessTest(pod, 1, defaultObservationTimeout)
		s.expectEvent(normal, "Killing", s.killingMsg("liveness"))
	}},

	// 14b. Upstream's httpGet protocol specs (1.37, KEP-5999, alpha upstream).
	// "should *not* be restarted with an httpGet liveness probe with protocol HTTP1"
	{"14b-http1-liveness-not-restarted", func(s *sc) {
		pod := s.newPod("test-webserver", target([]int32{80}, "--http=:80"), probes{
			Liveness: &v1.Probe{ProbeHandler: httpGetProtocolHandler("/", 80, v1.HTTPProtocolHTTP1), InitialDelaySeconds: 15, TimeoutSeconds: 5, FailureThreshold: 5},
		})
		s.runLivenessTest(pod, 0, 0)
		s.expectNoProbedEvent("Unhealthy", "")
	}},
	// "should be restarted with an httpGet liveness probe with protocol HTTP2 against HTTP/1.1 server"
	{"14b-h2c-against-http1-restarted", func(s *sc) {
		pod := s.newPod("liveness", target([]int32{8080}, "--http=:8080"), probes{
			Liveness: &v1.Probe{ProbeHandler: httpGetProtocolHandler("/healthz", 8080, v1.HTTPProtocolHTTP2), InitialDelaySeconds: probeTestInitialDelaySeconds, TimeoutSeconds: 5, FailureThreshold: 1},
		})
		s.runLivenessTest(pod, 1, defaultObservationTimeout)
		s.expectEvent(warning, "Unhealthy", "Liveness probe failed: ")
		s.expectEvent(normal, "Killing", s.killingMsg("liveness"))
	}},
	// "should be restarted with an httpGet liveness probe with protocol HTTP2 on wrong port"
	{"14b-h2c-wrong-port-restarted", func(s *sc) {
		pod := s.newPod("liveness", target([]int32{8080}, "--http=:8080", "--h2c"), probes{
			Liveness: &v1.Probe{ProbeHandler: httpGetProtocolHandler("/", 2333, v1.HTTPProtocolHTTP2), InitialDelaySeconds: probeTestInitialDelaySeconds * 4, TimeoutSeconds: 5, FailureThreshold: 1},
		})
		s.runLivenessTest(pod, 1, defaultObservationTimeout)
		s.expectEvent(normal, "Killing", s.killingMsg("liveness"))
	}},
	// "should *not* be restarted with an httpGet liveness probe with protocol HTTP2 against h2c server"
	{"14b-h2c-liveness-not-restarted", func(s *sc) {
		pod := s.newPod("test-h2c-server", target([]int32{80}, "--http=:80", "--h2c"), probes{
			Liveness: &v1.Probe{ProbeHandler: httpGetProtocolHandler("/", 80, v1.HTTPProtocolHTTP2), InitialDelaySeconds: 15, TimeoutSeconds: 5, FailureThreshold: 5},
		})
		s.runLivenessTest(pod, 0, 0)
		s.expectNoProbedEvent("Unhealthy", "")
	}},

	// 15. "should mark readiness on pods to false while pod is in progress of
	// terminating when a pod has a readiness probe"
	{"15-terminating-not-ready", func(s *sc) {
		script := `
_term() {
	rm -f /tmp/ready
	sleep 30
	exit 0
}
trap _term TERM
touch /tmp/ready
while true; do echo hello; sleep 10 & wait $!; done
`
		// Upstream leaves timeoutSeconds at 1s; on a busy node a timed-out
		// exec would flip readiness before the deletion this scenario is about.
		pod := s.newPod("probe-test", shell(script), probes{
			Readiness: &v1.Probe{ProbeHandler: execHandler("cat", "/tmp/ready"), FailureThreshold: 1, InitialDelaySeconds: 5, PeriodSeconds: 2, TimeoutSeconds: 5},
		})
		pod.Spec.TerminationGracePeriodSeconds = ptr(int64(30))
		s.create(pod)
		s.poll("pod Ready", time.Second, podStartTimeout, func(p *v1.Pod) (bool, error) { return isReady(p), nil })
		s.deleteAndExpectUnready(30 * time.Second)
	}},
	// 15. "should mark readiness on pods to false and disable liveness probes
	// while pod is in progress of terminating"
	{"15-terminating-no-liveness-kill", func(s *sc) {
		script := `
_term() {
	rm -f /tmp/ready
	rm -f /tmp/liveness
	sleep 20
	exit 0
}
trap _term TERM
touch /tmp/ready
touch /tmp/liveness
while true; do echo hello; sleep 10 & wait $!; done
`
		// timeoutSeconds 5 instead of upstream's default 1s, as above.
		pod := s.newPod("probe-test", shell(script), probes{
			Readiness: &v1.Probe{ProbeHandler: execHandler("cat", "/tmp/ready"), FailureThreshold: 1, InitialDelaySeconds: 5, PeriodSeconds: 2, TimeoutSeconds: 5},
			Liveness:  &v1.Probe{ProbeHandler: execHandler("cat", "/tmp/liveness"), FailureThreshold: 1, InitialDelaySeconds: 5, PeriodSeconds: 1, TimeoutSeconds: 5},
		})
		pod.Spec.TerminationGracePeriodSeconds = ptr(int64(30))
		s.create(pod)
		s.poll("pod Ready", time.Second, podStartTimeout, func(p *v1.Pod) (bool, error) { return isReady(p), nil })
		deletedAt := s.deleteAndExpectUnready(20 * time.Second)
		// Upstream watches the events for a minute: no liveness failure may
		// kill the container while it shuts down. A kill before the deletion
		// is outside this scenario when every liveness failure before it was
		// an exec timeout (a node too loaded to run cat in 5 s, where the
		// kubelet would kill too); any other kill fails it.
		deadline := time.Now().Add(time.Minute)
		for time.Now().Before(deadline) {
			for _, e := range s.events() {
				if !strings.Contains(e.Message, "failed liveness probe") {
					continue
				}
				// Event times are whole seconds.
				before := e.LastTimestamp.Time.Before(deletedAt.Truncate(time.Second))
				if before && s.livenessFailuresAllTimeouts(deletedAt) {
					s.note("a liveness kill at %s, before the deletion at %s, after exec timeouts only (a loaded node)",
						e.LastTimestamp.Format("15:04:05"), deletedAt.Format("15:04:05"))
					continue
				}
				s.t.Fatalf("liveness killed the container (%s, deletion at %s): %s %s x%d from %s: %q",
					e.LastTimestamp.Format("15:04:05"), deletedAt.Format("15:04:05"), e.Type, e.Reason, e.Count, e.Source.Component, e.Message)
			}
			time.Sleep(2 * time.Second) // pace the event reads
		}
		var unhealthy []string
		for _, e := range s.probedEvents() {
			if e.Reason == "Unhealthy" && strings.HasPrefix(e.Message, "Liveness probe") {
				unhealthy = append(unhealthy, strings.TrimSpace(e.Message))
			}
		}
		if len(unhealthy) > 0 {
			s.note("liveness probed during termination (no kill): %q", unhealthy)
		}
		s.note("no liveness kill in the minute after deletion")
	}},
}

// livenessFailuresAllTimeouts reports whether every liveness failure probed
// reported before t was an exec timeout.
func (s *sc) livenessFailuresAllTimeouts(t time.Time) bool {
	seen := false
	for _, e := range s.probedEvents() {
		if e.Reason != "Unhealthy" || !strings.HasPrefix(e.Message, "Liveness probe failed") || !e.FirstTimestamp.Time.Before(t) {
			continue
		}
		if !strings.Contains(e.Message, "timed out after") {
			return false
		}
		seen = true
	}
	return seen
}

// expectKilledWithin checks that the container, killed for a failed probe
// (kill), stopped about grace seconds later: the probe's
// terminationGracePeriodSeconds, not the pod's 500 s. sleep as PID 1 ignores
// SIGTERM, so it dies by SIGKILL when the grace period ends.
func (s *sc) expectKilledWithin(p *v1.Pod, kill v1.Event, grace int) {
	s.t.Helper()
	term := s.lastTermination(p)
	killedAt := kill.FirstTimestamp.Time
	if !kill.EventTime.IsZero() {
		killedAt = kill.EventTime.Time
	}
	took := term.FinishedAt.Sub(killedAt)
	s.note("container stopped %v after the Killing event (exit %d %s); probe grace %ds, pod grace %ds",
		took, term.ExitCode, term.Reason, grace, *p.Spec.TerminationGracePeriodSeconds)
	// Timestamps are whole seconds; allow for that and a busy node.
	if took < time.Duration(grace-2)*time.Second || took > time.Duration(grace+15)*time.Second {
		s.t.Errorf("the container stopped %v after the Killing event, want about %ds", took, grace)
	}
	if term.ExitCode != 137 {
		s.t.Errorf("exit code %d, want 137 (SIGKILL at the end of the grace period)", term.ExitCode)
	}
}

// deleteAndExpectUnready deletes the pod gracefully, then expects probed's
// readiness condition to turn False while the container still runs its
// SIGTERM handler (which removes /tmp/ready, then sleeps), and the pod's Ready
// condition to follow before the pod is gone.
func (s *sc) deleteAndExpectUnready(handlerSleep time.Duration) time.Time {
	s.t.Helper()
	// Delete the pod as it was last seen Ready with probed's readiness True,
	// and no later: a precondition on its resourceVersion makes sure the
	// False that follows comes after the deletion.
	var deletionRV string
	err := wait.PollUntilContextTimeout(s.ctx, 250*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		p := s.get()
		if !isReady(p) || condStatus(p, s.readyCond()) != v1.ConditionTrue {
			return false, nil
		}
		err := client.CoreV1().Pods(s.ns).Delete(ctx, s.podName, metav1.DeleteOptions{
			Preconditions: &metav1.Preconditions{ResourceVersion: &p.ResourceVersion},
		})
		if apierrors.IsConflict(err) {
			return false, nil
		}
		deletionRV = p.ResourceVersion
		return err == nil, err
	})
	if err != nil {
		s.t.Fatalf("deleting the Ready pod: %v", err)
	}
	deleted := time.Now()
	// Watch from the deletion's resourceVersion rather than poll: the
	// kubelet may post Ready=False and remove the pod within a few
	// milliseconds of each other, and a poll can miss the version between.
	wctx, cancel := context.WithTimeout(s.ctx, 2*time.Minute)
	defer cancel()
	w, err := client.CoreV1().Pods(s.ns).Watch(wctx, metav1.ListOptions{
		FieldSelector:   "metadata.name=" + s.podName,
		ResourceVersion: deletionRV,
	})
	if err != nil {
		s.t.Fatalf("watching the deleted pod: %v", err)
	}
	defer w.Stop()
	var gateFalse, podUnready time.Duration
	var last *v1.Pod
	err = func() error {
		for {
			select {
			case <-wctx.Done():
				return fmt.Errorf("timed out: %s False after %v, pod not Ready after %v", s.readyCond(), gateFalse, podUnready)
			case ev, ok := <-w.ResultChan():
				if !ok {
					return fmt.Errorf("the watch closed early")
				}
				p, isPod := ev.Object.(*v1.Pod)
				if !isPod {
					return fmt.Errorf("watch event %s: %v", ev.Type, ev.Object)
				}
				if ev.Type == watch.Deleted {
					// The kubelet stops a sidecar last and may not re-post
					// Ready from the readiness gate before the pod is gone;
					// probed's part is its gate turning False while the
					// sidecar still ran.
					if s.place == sidecar && gateFalse != 0 && podUnready == 0 {
						s.t.Logf("%v: pod gone %v after deletion; the kubelet never posted Ready=False, probed's gate was False after %v",
							s.elapsed(), time.Since(deleted).Round(10*time.Millisecond), gateFalse.Round(10*time.Millisecond))
						podUnready = time.Since(deleted)
						return nil
					}
					if gateFalse == 0 || podUnready == 0 {
						return fmt.Errorf("the pod was gone before it was seen not Ready")
					}
					return nil
				}
				last = p
				if gateFalse == 0 && condStatus(p, s.readyCond()) == v1.ConditionFalse {
					gateFalse = time.Since(deleted)
					cs := s.status(p)
					running := cs != nil && cs.State.Running != nil
					s.t.Logf("%v: %s False %v after deletion (%s); container running: %v",
						s.elapsed(), s.readyCond(), gateFalse.Round(10*time.Millisecond), condition(p, s.readyCond()).Reason, running)
					if gateFalse >= handlerSleep {
						return fmt.Errorf("%s turned False only %v after deletion, when the container had stopped anyway", s.readyCond(), gateFalse)
					}
				}
				if podUnready == 0 && !isReady(p) {
					podUnready = time.Since(deleted)
					s.t.Logf("%v: pod not Ready %v after deletion", s.elapsed(), podUnready.Round(10*time.Millisecond))
				}
				if gateFalse != 0 && podUnready != 0 {
					return nil
				}
			}
		}
	}()
	if err != nil {
		s.t.Fatalf("%v: after deletion: %v; pod: %s", s.elapsed(), err, summarize(last))
	}
	s.note("after deletion: %s False in %v, pod Ready False in %v (SIGTERM handler runs %v)",
		s.readyCond(), gateFalse.Round(10*time.Millisecond), podUnready.Round(10*time.Millisecond), handlerSleep)
	return deleted
}
