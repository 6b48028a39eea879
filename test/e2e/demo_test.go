//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
)

// testDemo applies examples/demo/ as a user would (kubectl apply -f) and
// checks that each workload behaves as its README says.
func testDemo(t *testing.T) {
	ctx := context.Background()
	dir := filepath.Join(repoRoot, "examples/demo")
	// The demo's pods pass the start gate as the scenarios' pods do.
	for range demoPods {
		a, err := startGate.enter(ctx)
		if err != nil {
			t.Fatalf("waiting at the start gate: %v", err)
		}
		if a.waited > time.Second || a.slowed {
			t.Log(a)
		}
	}
	go leaveGateWhenDemoRuns()
	out, err := kubectl(ctx, "apply", "-f", dir)
	if err != nil {
		t.Fatalf("kubectl apply -f %s: %v\n%s", dir, err, out)
	}
	t.Logf("kubectl apply -f examples/demo/:\n%s", out)
	t.Cleanup(func() {
		out, err := kubectl(context.Background(), "delete", "-f", dir, "--wait=false")
		if err != nil {
			t.Logf("kubectl delete -f %s: %v\n%s", dir, err, out)
		}
	})

	checks := []struct {
		app, container string
		run            func(s *sc)
	}{
		// Readiness flips every 20 s; the pod's Ready and the Service's
		// endpoint follow. The flip is timed by probed's condition, which
		// probed sets: the pod's Ready follows it when the kubelet next syncs
		// the pod, seconds later on a loaded node (14.7 s between the test's
		// sightings of a 20 s flip, on a node at 95 % CPU pressure).
		{"flappy-web", "web", func(s *sc) {
			cond := s.readyCond()
			p := s.poll("pod Ready", time.Second, podStartTimeout, func(p *v1.Pod) (bool, error) { return isReady(p), nil })
			readyAt := condition(p, cond).LastTransitionTime.Time
			p = s.poll("pod not Ready (flip)", 250*time.Millisecond, time.Minute, func(p *v1.Pod) (bool, error) { return !isReady(p), nil })
			down := condition(p, cond)
			s.expectEndpointReady(p, "flappy-web", false)
			p = s.poll("pod Ready again (flip)", 250*time.Millisecond, time.Minute, func(p *v1.Pod) (bool, error) { return isReady(p), nil })
			up := condition(p, cond)
			s.expectEndpointReady(p, "flappy-web", true)
			if down == nil || down.Status != v1.ConditionFalse || up == nil || up.Status != v1.ConditionTrue {
				s.t.Fatalf("%s: %+v when the pod was not Ready, %+v when Ready again; want False, then True", cond, down, up)
			}
			downAt, upAt := down.LastTransitionTime.Time, up.LastTransitionTime.Time
			s.note("readiness flipped (%s): down %v after Ready, up again %v later", cond, downAt.Sub(readyAt).Round(time.Second), upAt.Sub(downAt).Round(time.Second))
			if d := upAt.Sub(downAt); d < 15*time.Second || d > 30*time.Second {
				s.t.Errorf("not ready for %v, want about 20s", d)
			}
			if rc := s.restartCount(s.get()); rc != 0 {
				s.t.Errorf("restarted %d times, want 0", rc)
			}
		}},
		// Liveness fails 45 s after each start; probed has it restarted.
		{"crashy", "app", func(s *sc) {
			p := s.waitContainerStarted()
			s.expectRestarts(s.restartCount(p), 1, 3*time.Minute)
			s.expectEvent(warning, "Unhealthy", "Liveness probe failed: HTTP probe failed with statuscode: 500")
			s.expectEvent(normal, "Killing", s.killingMsg("liveness"))
		}},
		// Listens only after 40 s; the startup probe covers it, then it turns Ready.
		{"slow-starter", "app", func(s *sc) {
			p := s.poll("pod Ready", time.Second, podStartTimeout, func(p *v1.Pod) (bool, error) { return isReady(p), nil })
			cs := s.status(p)
			started := condition(p, s.startedCond())
			if cs == nil || cs.State.Running == nil || started == nil || started.Status != v1.ConditionTrue {
				s.t.Fatalf("want a running container started by its startup probe: %s", summarize(p))
			}
			after := started.LastTransitionTime.Sub(cs.State.Running.StartedAt.Time)
			s.note("startup probe succeeded %v after the container started (it listens after 40s)", after)
			if after < 39*time.Second {
				s.t.Errorf("startup succeeded %v after start, before the port opened at 40s", after)
			}
			if cs.RestartCount != 0 {
				s.t.Errorf("restarted %d times: the slow start was taken for a failure", cs.RestartCount)
			}
			s.expectEvent(warning, "Unhealthy", "Startup probe failed: ")
			s.expectNoProbedEvent("Killing", "")
		}},
		// gRPC liveness and readiness, plus a sidecar's exec readiness.
		{"grpc-service", "server", func(s *sc) {
			p := s.poll("pod Ready", time.Second, podStartTimeout, func(p *v1.Pod) (bool, error) { return isReady(p), nil })
			for _, c := range []string{"ready.probed.io/server", "ready.probed.io/log-agent"} {
				if st := condStatus(p, c); st != v1.ConditionTrue {
					s.t.Errorf("%s = %s, want True", c, st)
				}
			}
			for _, cs := range append(append([]v1.ContainerStatus{}, p.Status.InitContainerStatuses...), p.Status.ContainerStatuses...) {
				if cs.RestartCount != 0 {
					s.t.Errorf("container %s restarted %d times", cs.Name, cs.RestartCount)
				}
			}
			server := s.status(p)
			readyAt := condition(p, "ready.probed.io/server").LastTransitionTime.Time
			s.note("gRPC readiness True %v after the server started (warms up 15s)", readyAt.Sub(server.State.Running.StartedAt.Time))
			s.expectEvent(warning, "Unhealthy", "Readiness probe failed: service unhealthy")
		}},
	}
	for _, c := range checks {
		t.Run(c.app, func(t *testing.T) {
			t.Parallel()
			s := newSC(t, "demo-"+c.app, regular)
			s.group, s.ns = "demo", demoNS
			s.findPod(c.app, c.container)
			c.run(s)
		})
	}
}

// demoPods is how many pods examples/demo/ starts: one per Deployment.
const demoPods = 4

// leaveGateWhenDemoRuns gives the demo's start slots back as its pods' first
// containers run, and the rest after startSlotHold.
func leaveGateWhenDemoRuns() {
	left := demoPods
	defer func() {
		for range left {
			startGate.leave()
		}
	}()
	_ = wait.PollUntilContextTimeout(context.Background(), 500*time.Millisecond, startSlotHold, true, func(ctx context.Context) (bool, error) {
		list, err := client.CoreV1().Pods(demoNS).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, nil
		}
		ran := 0
		for _, p := range list.Items {
			for _, cs := range append(append([]v1.ContainerStatus{}, p.Status.InitContainerStatuses...), p.Status.ContainerStatuses...) {
				if hasRun(&cs) {
					ran++
					break
				}
			}
		}
		for ; left > demoPods-min(ran, demoPods); left-- {
			startGate.leave()
		}
		return left == 0, nil
	})
}

// findPod waits for the Deployment's pod and makes it the scenario's.
func (s *sc) findPod(app, container string) {
	s.t.Helper()
	err := wait.PollUntilContextTimeout(s.ctx, 500*time.Millisecond, podStartTimeout, true, func(ctx context.Context) (bool, error) {
		list, err := client.CoreV1().Pods(s.ns).List(ctx, metav1.ListOptions{LabelSelector: "app.kubernetes.io/name=" + app})
		if err != nil {
			return false, nil
		}
		for i := range list.Items {
			if list.Items[i].DeletionTimestamp == nil {
				s.pod = &list.Items[i]
				return true, nil
			}
		}
		return false, nil
	})
	if err != nil {
		s.t.Fatalf("no pod of %s/%s: %v", s.ns, app, err)
	}
	s.podName, s.container = s.pod.Name, container
	s.t.Logf("demo pod %s/%s", s.ns, s.podName)
}

// expectEndpointReady waits for the pod's endpoint in service's EndpointSlices
// to have conditions.ready == ready.
func (s *sc) expectEndpointReady(p *v1.Pod, service string, ready bool) {
	s.t.Helper()
	var seen string
	err := wait.PollUntilContextTimeout(s.ctx, 250*time.Millisecond, 15*time.Second, true, func(ctx context.Context) (bool, error) {
		list, err := client.DiscoveryV1().EndpointSlices(s.ns).List(ctx, metav1.ListOptions{LabelSelector: discoveryv1.LabelServiceName + "=" + service})
		if err != nil {
			return false, nil
		}
		seen = ""
		for _, sl := range list.Items {
			for _, ep := range sl.Endpoints {
				if ep.TargetRef != nil && ep.TargetRef.UID == p.UID {
					r := ep.Conditions.Ready != nil && *ep.Conditions.Ready
					seen = fmt.Sprint(r)
					if r == ready {
						return true, nil
					}
				}
			}
		}
		return false, nil
	})
	if err != nil {
		s.t.Errorf("the endpoint of pod %s in service %s: ready %q, want %v", p.Name, service, seen, ready)
	}
}
