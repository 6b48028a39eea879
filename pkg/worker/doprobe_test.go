package worker

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"strings"
	"unicode/utf8"
	"unsafe"

	"github.com/probed-dev/probed/pkg/probespec"
	"github.com/probed-dev/probed/pkg/results"
)

var allTypes = []probespec.ProbeType{probespec.Liveness, probespec.Readiness, probespec.Startup}

func TestDoProbe(t *testing.T) {
	now := epoch
	running := runningPod(now)

	mutate := func(f func(p *v1.Pod)) *v1.Pod {
		p := running.DeepCopy()
		f(p)
		return p
	}
	terminated := func(policy v1.RestartPolicy, exit int32) *v1.Pod {
		return mutate(func(p *v1.Pod) {
			p.Spec.RestartPolicy = policy
			p.Status.ContainerStatuses[0].State = v1.ContainerState{Terminated: &v1.ContainerStateTerminated{ExitCode: exit}}
		})
	}
	// asInit moves the container into the init containers, as a sidecar
	// (restartPolicy Always) or a plain init container.
	asInit := func(p *v1.Pod, sidecar bool) *v1.Pod {
		p = p.DeepCopy()
		c := v1.Container{Name: testContainer}
		if sidecar {
			always := v1.ContainerRestartPolicyAlways
			c.RestartPolicy = &always
		}
		p.Spec.InitContainers, p.Spec.Containers = []v1.Container{c}, []v1.Container{{Name: "main"}}
		p.Status.InitContainerStatuses = p.Status.ContainerStatuses
		p.Status.ContainerStatuses = []v1.ContainerStatus{{Name: "main"}}
		return p
	}
	deleting := mutate(func(p *v1.Pod) { p.DeletionTimestamp = &metav1.Time{Time: now} })
	never, alwaysC := v1.ContainerRestartPolicyNever, v1.ContainerRestartPolicyAlways
	// withRules gives the probed container its own restartPolicy and rules.
	withRules := func(p *v1.Pod, policy *v1.ContainerRestartPolicy, rules ...v1.ContainerRestartRule) *v1.Pod {
		p = p.DeepCopy()
		p.Spec.Containers[0].RestartPolicy = policy
		p.Spec.Containers[0].RestartPolicyRules = rules
		return p
	}

	type want struct {
		keepGoing bool
		set       bool
		result    results.Result
		probed    bool
	}
	ok := want{keepGoing: true, set: true, result: results.Success, probed: true}
	waitNoResult := want{keepGoing: true}
	failedGoOn := want{keepGoing: true, set: true, result: results.Failure}
	failedStop := want{set: true, result: results.Failure}

	tests := []struct {
		name  string
		pod   *v1.Pod
		delay int32
		// want is the same for every probe type unless byType has an entry.
		want   want
		byType map[probespec.ProbeType]want
	}{
		{name: "no pod", want: waitNoResult},
		{name: "pod failed", pod: mutate(func(p *v1.Pod) { p.Status.Phase = v1.PodFailed })},
		{name: "pod succeeded", pod: mutate(func(p *v1.Pod) { p.Status.Phase = v1.PodSucceeded })},
		{name: "no container status", pod: mutate(func(p *v1.Pod) { p.Status.ContainerStatuses[0].Name = "other" }), want: waitNoResult},
		{name: "container without ID", pod: mutate(func(p *v1.Pod) { p.Status.ContainerStatuses[0].ContainerID = "" }), want: waitNoResult},
		{name: "container waiting", pod: mutate(func(p *v1.Pod) {
			p.Status.ContainerStatuses[0].State = v1.ContainerState{Waiting: &v1.ContainerStateWaiting{Reason: "ContainerCreating"}}
		}), want: failedGoOn},
		{name: "terminated, restartPolicy Never", pod: terminated(v1.RestartPolicyNever, 1), want: failedStop},
		{name: "terminated exit 0, restartPolicy Never", pod: terminated(v1.RestartPolicyNever, 0), want: failedStop},
		{name: "terminated exit 1, restartPolicy OnFailure", pod: terminated(v1.RestartPolicyOnFailure, 1), want: failedGoOn},
		// From 1.35 (ContainerRestartRules on by default) the kubelet's
		// worker asks ContainerShouldRestart: exit 0 under OnFailure ends it.
		{name: "terminated exit 0, restartPolicy OnFailure", pod: terminated(v1.RestartPolicyOnFailure, 0), want: failedStop},
		// A container's own restartPolicy and restartPolicyRules (KEP-5307)
		// come before the pod's.
		{name: "terminated exit 42, pod Never, container rule restarts 42", pod: withRules(terminated(v1.RestartPolicyNever, 42), &never,
			v1.ContainerRestartRule{Action: v1.ContainerRestartRuleActionRestart, ExitCodes: &v1.ContainerRestartRuleOnExitCodes{Operator: v1.ContainerRestartRuleOnExitCodesOpIn, Values: []int32{42}}}),
			want: failedGoOn},
		{name: "terminated exit 1, pod Never, container rule restarts 42", pod: withRules(terminated(v1.RestartPolicyNever, 1), &never,
			v1.ContainerRestartRule{Action: v1.ContainerRestartRuleActionRestart, ExitCodes: &v1.ContainerRestartRuleOnExitCodes{Operator: v1.ContainerRestartRuleOnExitCodesOpIn, Values: []int32{42}}}),
			want: failedStop},
		{name: "terminated exit 1, pod Never, container Always", pod: withRules(terminated(v1.RestartPolicyNever, 1), &alwaysC), want: failedGoOn},
		{name: "terminated exit 1, pod Always, container Never", pod: withRules(terminated(v1.RestartPolicyAlways, 1), &never), want: failedStop},
		{name: "terminated exit 1, pod Never, another container's RestartAllContainers rule matched", pod: mutate(func(p *v1.Pod) {
			p.Spec.RestartPolicy = v1.RestartPolicyNever
			p.Status.ContainerStatuses[0].State = v1.ContainerState{Terminated: &v1.ContainerStateTerminated{ExitCode: 1}}
			p.Spec.Containers = append(p.Spec.Containers, v1.Container{Name: "trigger", RestartPolicy: &never, RestartPolicyRules: []v1.ContainerRestartRule{{
				Action: v1.ContainerRestartRuleActionRestartAllContainers, ExitCodes: &v1.ContainerRestartRuleOnExitCodes{Operator: v1.ContainerRestartRuleOnExitCodesOpIn, Values: []int32{9}}}}})
			p.Status.ContainerStatuses = append(p.Status.ContainerStatuses, v1.ContainerStatus{Name: "trigger", ContainerID: "containerd://trigger",
				State: v1.ContainerState{Terminated: &v1.ContainerStateTerminated{ExitCode: 9}}})
		}), want: failedGoOn},
		{name: "terminated, restartPolicy Always", pod: terminated(v1.RestartPolicyAlways, 0), want: failedGoOn},
		{name: "terminated sidecar, restartPolicy Never", pod: asInit(terminated(v1.RestartPolicyNever, 0), true), want: failedGoOn},
		{name: "terminated plain init container, restartPolicy Never", pod: asInit(terminated(v1.RestartPolicyNever, 1), false), want: failedStop},
		{name: "running", pod: running, want: ok},
		{name: "running sidecar", pod: asInit(running, true), want: ok},
		{name: "initial delay passed", pod: running, delay: -100, want: ok},
		{name: "initial delay not passed", pod: running, delay: 10, byType: map[probespec.ProbeType]want{
			probespec.Liveness:  {keepGoing: true, set: true, result: results.Success},
			probespec.Readiness: {keepGoing: true, set: true, result: results.Failure},
			probespec.Startup:   {keepGoing: true, set: true, result: results.Unknown},
		}},
		{name: "pod being deleted", pod: deleting, byType: map[probespec.ProbeType]want{
			probespec.Liveness:  {set: true, result: results.Success},
			probespec.Readiness: ok,
			probespec.Startup:   {set: true, result: results.Success},
		}},
	}

	for _, pt := range allTypes {
		for _, tc := range tests {
			t.Run(fmt.Sprintf("%v/%s", pt, tc.name), func(t *testing.T) {
				e, w := newEnv(t, pt, v1.Probe{InitialDelaySeconds: tc.delay})
				if tc.pod != nil {
					e.pods.set(tc.pod)
				}
				want := tc.want
				if w, found := tc.byType[pt]; found {
					want = w
				}
				if got := w.doProbe(context.Background()); got != want.keepGoing {
					t.Errorf("keepGoing = %v, want %v", got, want.keepGoing)
				}
				got, set := e.results.Get(testID)
				if set != want.set {
					t.Fatalf("result set = %v, want %v", set, want.set)
				}
				if set && got.Result != want.result {
					t.Errorf("result = %v, want %v", got, want.result)
				}
				if probed := e.prober.count() > 0; probed != want.probed {
					t.Errorf("prober called = %v, want %v", probed, want.probed)
				}
				if !want.keepGoing && w.Snapshot().State != StateStopped {
					t.Errorf("state = %q, want %q", w.Snapshot().State, StateStopped)
				}
			})
		}
	}
}

func TestProbeTarget(t *testing.T) {
	e, w := newEnv(t, probespec.Readiness, v1.Probe{})
	e.pods.set(runningPod(epoch))
	expectContinue(t, w, "probe")
	e.prober.mu.Lock()
	target, events := e.prober.target, e.prober.events
	e.prober.mu.Unlock()
	if target.PodIP != "10.0.0.7" || target.ContainerID != testID || len(target.Ports) != 1 {
		t.Errorf("target = %+v", target)
	}
	// The prober's events go to the Recorder, addressed to the container.
	events.Event(v1.EventTypeWarning, "Unhealthy", "Readiness probe failed: boom")
	if got := e.rec.list(); len(got) != 1 || got[0] != "app Warning Unhealthy Readiness probe failed: boom" {
		t.Errorf("events = %q", got)
	}
	// A nil Recorder drops them.
	(&containerEvents{}).Event(v1.EventTypeNormal, "x", "y")
}

func TestInitialDelay(t *testing.T) {
	for _, pt := range allTypes {
		t.Run(pt.String(), func(t *testing.T) {
			e, w := newEnv(t, pt, v1.Probe{InitialDelaySeconds: 10})
			e.pods.set(runningPod(e.clock.Now()))

			expectContinue(t, w, "during initial delay")
			expectResult(t, e, testID, initialValue(pt), "during initial delay")
			if s := w.Snapshot().State; s != StateInitialDelay {
				t.Errorf("state = %q, want %q", s, StateInitialDelay)
			}
			// Whole seconds count, as in the kubelet: 9.9s is still 9.
			e.clock.Step(9900 * time.Millisecond)
			expectContinue(t, w, "9.9s in")
			if n := e.prober.count(); n != 0 {
				t.Fatalf("probed %d times during the initial delay", n)
			}

			e.clock.Step(100 * time.Millisecond)
			expectContinue(t, w, "after initial delay")
			expectResult(t, e, testID, results.Success, "after initial delay")
		})
	}
}

func TestFailureThreshold(t *testing.T) {
	e, w := newEnv(t, probespec.Readiness, v1.Probe{SuccessThreshold: 1, FailureThreshold: 3})
	e.pods.set(runningPod(epoch))

	for i := 0; i < 2; i++ {
		e.prober.set(results.Success)
		for j := 0; j < 3; j++ {
			msg := fmt.Sprintf("round %d: success %d", i, j+1)
			expectContinue(t, w, msg)
			expectResult(t, e, testID, results.Success, msg)
		}
		e.prober.set(results.Failure)
		for j := 0; j < 2; j++ {
			msg := fmt.Sprintf("round %d: failure %d below threshold", i, j+1)
			expectContinue(t, w, msg)
			expectResult(t, e, testID, results.Success, msg)
		}
		for j := 0; j < 3; j++ {
			msg := fmt.Sprintf("round %d: failure %d at threshold", i, j+3)
			expectContinue(t, w, msg)
			expectResult(t, e, testID, results.Failure, msg)
		}
	}
	if w.onHold {
		t.Error("a readiness failure put the worker on hold")
	}
}

func TestSuccessThreshold(t *testing.T) {
	e, w := newEnv(t, probespec.Readiness, v1.Probe{SuccessThreshold: 3, FailureThreshold: 1})
	e.pods.set(runningPod(epoch))

	for i := 0; i < 2; i++ {
		for j := 0; j < 2; j++ {
			msg := fmt.Sprintf("round %d: success %d below threshold", i, j+1)
			expectContinue(t, w, msg)
			expectResult(t, e, testID, results.Failure, msg)
		}
		for j := 0; j < 3; j++ {
			msg := fmt.Sprintf("round %d: success %d at threshold", i, j+3)
			expectContinue(t, w, msg)
			expectResult(t, e, testID, results.Success, msg)
		}
		// One failure is enough with failureThreshold 1.
		e.prober.set(results.Failure)
		expectContinue(t, w, "flake")
		expectResult(t, e, testID, results.Failure, "flake")
		e.prober.set(results.Success)
	}
}

func TestStartupProbeSuccessThreshold(t *testing.T) {
	const successThreshold = 1
	e, w := newEnv(t, probespec.Startup, v1.Probe{SuccessThreshold: successThreshold, FailureThreshold: 3})
	e.pods.set(runningPod(epoch))

	for i := 0; i < successThreshold+2; i++ {
		if held := w.onHold; held != (i >= successThreshold) {
			t.Fatalf("probe %d: onHold = %v", i, held)
		}
		if w.resultRun >= successThreshold {
			t.Fatalf("probe %d: resultRun = %d, want it reset below %d", i, w.resultRun, successThreshold)
		}
		expectContinue(t, w, fmt.Sprintf("probe %d", i))
	}
	expectResult(t, e, testID, results.Success, "after success")
	if n := e.prober.count(); n != successThreshold {
		t.Errorf("prober called %d times, want %d: a startup success holds the worker", n, successThreshold)
	}
	if len(e.killer.calls()) != 0 {
		t.Error("a startup success killed the container")
	}
}

func TestStartupProbeFailureThreshold(t *testing.T) {
	const failureThreshold = 3
	e, w := newEnv(t, probespec.Startup, v1.Probe{SuccessThreshold: 1, FailureThreshold: failureThreshold})
	e.pods.set(runningPod(epoch))
	e.prober.set(results.Failure)

	for i := 0; i < failureThreshold+2; i++ {
		if held := w.onHold; held != (i >= failureThreshold) {
			t.Fatalf("probe %d: onHold = %v", i, held)
		}
		wantRun := i
		if i >= failureThreshold {
			wantRun = 0
		}
		if w.resultRun != wantRun {
			t.Fatalf("probe %d: resultRun = %d, want %d", i, w.resultRun, wantRun)
		}
		expectContinue(t, w, fmt.Sprintf("probe %d", i))
		want := results.Unknown
		if i+1 >= failureThreshold {
			want = results.Failure
		}
		expectResult(t, e, testID, want, fmt.Sprintf("probe %d", i))
	}
	if n := e.prober.count(); n != failureThreshold {
		t.Errorf("prober called %d times, want %d", n, failureThreshold)
	}
	kills := e.killer.calls()
	if len(kills) != 1 || kills[0] != (killCall{testID, testContainer, probespec.Startup, 2 * time.Second}) {
		t.Errorf("kills = %+v, want one of %s", kills, testID)
	}
}

// A startup probe that is neither success nor failure at its threshold also
// holds, as the kubelet's condition reads; nothing is killed.
func TestStartupProbeUnknownHolds(t *testing.T) {
	e, w := newEnv(t, probespec.Startup, v1.Probe{})
	e.pods.set(runningPod(epoch))
	e.prober.set(results.Unknown)
	expectContinue(t, w, "unknown")
	if !w.onHold {
		t.Error("startup Unknown did not hold the worker")
	}
	if len(e.killer.calls()) != 0 {
		t.Error("startup Unknown killed the container")
	}
}

func TestOnHoldAfterFailureUntilNewContainer(t *testing.T) {
	for _, pt := range []probespec.ProbeType{probespec.Liveness, probespec.Startup} {
		t.Run(pt.String(), func(t *testing.T) {
			e, w := newEnv(t, pt, v1.Probe{SuccessThreshold: 1, FailureThreshold: 1})
			pod := runningPod(epoch)
			e.pods.set(pod)

			e.prober.set(results.Failure)
			expectContinue(t, w, "first probe")
			expectResult(t, e, testID, results.Failure, "first probe")
			if !w.onHold {
				t.Fatal("not on hold after a failure at threshold")
			}
			if s := w.Snapshot().State; s != StateOnHold {
				t.Errorf("state = %q, want %q", s, StateOnHold)
			}

			// On hold: no probing, the failure stays.
			e.prober.set(results.Success)
			expectContinue(t, w, "while on hold")
			expectResult(t, e, testID, results.Failure, "while on hold")
			if n := e.prober.count(); n != 1 {
				t.Fatalf("probed %d times, want 1", n)
			}
			if n := len(e.killer.calls()); n != 1 {
				t.Fatalf("killed %d times, want 1", n)
			}

			// A new container lifts the hold: the old result goes, the new
			// instance starts from the initial value, then probes.
			e.pods.set(withID(pod, newID))
			expectContinue(t, w, "hold lifted")
			if n := e.prober.count(); n != 2 {
				t.Fatalf("probed %d times, want 2: the new container is probed", n)
			}
			// A startup success at threshold holds again; liveness goes on.
			if w.onHold != (pt == probespec.Startup) {
				t.Fatalf("onHold = %v after a success on the new container", w.onHold)
			}
			if _, ok := e.results.Get(testID); ok {
				t.Error("the old container's result was kept")
			}
			expectResult(t, e, newID, results.Success, "hold lifted")
		})
	}
}

func TestResultRunResetsOnHold(t *testing.T) {
	for _, pt := range []probespec.ProbeType{probespec.Liveness, probespec.Startup} {
		t.Run(pt.String(), func(t *testing.T) {
			e, w := newEnv(t, pt, v1.Probe{SuccessThreshold: 1, FailureThreshold: 3})
			pod := runningPod(epoch)
			e.pods.set(pod)
			e.prober.set(results.Failure)

			for want := 1; want <= 2; want++ {
				expectContinue(t, w, "failure")
				if w.resultRun != want {
					t.Fatalf("resultRun = %d, want %d", w.resultRun, want)
				}
			}
			expectContinue(t, w, "failure at threshold")
			if w.resultRun != 0 || !w.onHold {
				t.Fatalf("at threshold: resultRun = %d, onHold = %v; want 0, true", w.resultRun, w.onHold)
			}

			// The count starts again for the next container: one failure is
			// not yet enough.
			e.pods.set(withID(pod, newID))
			expectContinue(t, w, "new container, first failure")
			if w.resultRun != 1 || w.onHold {
				t.Fatalf("new container: resultRun = %d, onHold = %v; want 1, false", w.resultRun, w.onHold)
			}
			expectResult(t, e, newID, initialValue(pt), "new container below threshold")
		})
	}
}

func TestLivenessAndReadinessWaitForStarted(t *testing.T) {
	for _, pt := range []probespec.ProbeType{probespec.Liveness, probespec.Readiness} {
		t.Run(pt.String(), func(t *testing.T) {
			e, w := newEnv(t, pt, v1.Probe{})
			pod := runningPod(epoch)
			// The kubelet says started; probed's own notion says not yet,
			// and probed's wins (contract §2).
			yes := true
			pod.Status.ContainerStatuses[0].Started = &yes
			e.pods.set(pod)
			e.started.Store(false)

			expectContinue(t, w, "not started")
			if n := e.prober.count(); n != 0 {
				t.Fatalf("probed %d times before started", n)
			}
			expectResult(t, e, testID, initialValue(pt), "not started")
			if s := w.Snapshot().State; s != StateWaitingForStartup {
				t.Errorf("state = %q, want %q", s, StateWaitingForStartup)
			}

			e.started.Store(true)
			expectContinue(t, w, "started")
			expectResult(t, e, testID, results.Success, "started")
		})
	}
}

func TestStartupDisabledOnceStarted(t *testing.T) {
	e, w := newEnv(t, probespec.Startup, v1.Probe{})
	e.pods.set(runningPod(epoch))
	e.started.Store(true)
	expectContinue(t, w, "started")
	if n := e.prober.count(); n != 0 {
		t.Fatalf("startup probed %d times after started", n)
	}
	expectResult(t, e, testID, results.Unknown, "started")
	if s := w.Snapshot().State; s != StateOnHold {
		t.Errorf("state = %q, want %q", s, StateOnHold)
	}
}

// Without Config.Started the kubelet's containerStatuses[].started decides.
func TestStartedDefaultsToContainerStatus(t *testing.T) {
	e, w := newEnv(t, probespec.Liveness, v1.Probe{}, func(c *Config) { c.Started = nil })
	pod := runningPod(epoch)
	e.pods.set(pod)
	expectContinue(t, w, "started unset")
	if e.prober.count() != 0 {
		t.Fatal("probed with started unset")
	}
	yes := true
	pod = pod.DeepCopy()
	pod.Status.ContainerStatuses[0].Started = &yes
	e.pods.set(pod)
	expectContinue(t, w, "started")
	if e.prober.count() != 1 {
		t.Fatal("not probed once started")
	}
}

func TestInitialResultSeedsFirstInstanceOnly(t *testing.T) {
	var asked []string
	seed := func(id string) (results.Result, bool) {
		asked = append(asked, id)
		return results.Success, true
	}
	e, w := newEnv(t, probespec.Readiness, v1.Probe{InitialDelaySeconds: 100}, func(c *Config) { c.InitialResult = seed })
	pod := runningPod(epoch)
	e.pods.set(pod)

	expectContinue(t, w, "first instance")
	expectResult(t, e, testID, results.Success, "seeded first instance")

	e.pods.set(withID(pod, newID))
	expectContinue(t, w, "second instance")
	expectResult(t, e, newID, results.Failure, "second instance gets the initial value")
	if len(asked) != 1 || asked[0] != testID {
		t.Errorf("InitialResult asked for %q, want only %q", asked, testID)
	}
}

func TestInitialResultWithoutSeed(t *testing.T) {
	e, w := newEnv(t, probespec.Readiness, v1.Probe{InitialDelaySeconds: 100}, func(c *Config) {
		c.InitialResult = func(string) (results.Result, bool) { return results.Success, false }
	})
	e.pods.set(runningPod(epoch))
	expectContinue(t, w, "no seed")
	expectResult(t, e, testID, results.Failure, "no seed")
}

func TestProberErrorDiscardsResult(t *testing.T) {
	e, w := newEnv(t, probespec.Readiness, v1.Probe{FailureThreshold: 1})
	e.pods.set(runningPod(epoch))
	e.prober.mu.Lock()
	e.prober.result, e.prober.err = results.Failure, errors.New("exec: no such container")
	e.prober.mu.Unlock()

	expectContinue(t, w, "errored probe")
	expectResult(t, e, testID, results.Failure, "initial value kept")
	if w.counted || w.resultRun != 0 {
		t.Errorf("an errored probe was counted: resultRun = %d", w.resultRun)
	}
	if n := testutil.CollectAndCount(e.metrics.probeTotal); n != 0 {
		t.Errorf("errored probe counted in prober_probe_total (%d series)", n)
	}
	h := w.Snapshot().History
	if len(h) != 1 || h[0].Result != "error" || h[0].Error != "exec: no such container" {
		t.Errorf("history = %+v", h)
	}
}

func TestPanicIsRecoveredAndCounted(t *testing.T) {
	e, w := newEnv(t, probespec.Readiness, v1.Probe{})
	e.pods.set(runningPod(epoch))
	expectContinue(t, w, "healthy probe")
	expectResult(t, e, testID, results.Success, "healthy probe")

	e.prober.mu.Lock()
	e.prober.panicWith = "intentional probe crash"
	e.prober.mu.Unlock()
	expectContinue(t, w, "crashing probe")
	expectResult(t, e, testID, results.Success, "crashing probe leaves the result")

	// A panic outside the prober is caught too.
	e.pods.hook = func() { panic("cache crash") }
	expectContinue(t, w, "crashing pod source")

	if got := testutil.ToFloat64(e.metrics.panics.WithLabelValues("Readiness")); got != 2 {
		t.Errorf("probed_probe_panics_total = %v, want 2", got)
	}
	h := w.Snapshot().History
	if last := h[len(h)-1]; last.Result != "error" || last.Error != "panic: cache crash" {
		t.Errorf("last history entry = %+v", last)
	}
}

func TestKillAtLivenessThreshold(t *testing.T) {
	e, w := newEnv(t, probespec.Liveness, v1.Probe{FailureThreshold: 2})
	pod := runningPod(epoch)
	grace := int64(45)
	pod.Spec.TerminationGracePeriodSeconds = &grace
	e.pods.set(pod)
	e.prober.set(results.Failure)

	expectContinue(t, w, "failure 1")
	if len(e.killer.calls()) != 0 {
		t.Fatal("killed below threshold")
	}
	expectContinue(t, w, "failure 2")
	expectContinue(t, w, "on hold")
	kills := e.killer.calls()
	if len(kills) != 1 || kills[0] != (killCall{testID, testContainer, probespec.Liveness, 45 * time.Second}) {
		t.Fatalf("kills = %+v", kills)
	}
	if got := testutil.ToFloat64(e.metrics.kills.WithLabelValues("Liveness", KillOutcomeSuccess)); got != 1 {
		t.Errorf("kills{outcome=success} = %v, want 1", got)
	}
}

func TestKillErrorIsRetriedWhileRunning(t *testing.T) {
	e, w := newEnv(t, probespec.Liveness, v1.Probe{FailureThreshold: 1})
	pod := runningPod(epoch)
	e.pods.set(pod)
	e.prober.set(results.Failure)
	e.killer.err = errors.New("runtime unavailable")

	expectContinue(t, w, "failure at threshold")
	expectContinue(t, w, "retry while running")
	if n := len(e.killer.calls()); n != 2 {
		t.Fatalf("kill attempts = %d, want 2", n)
	}
	if got := testutil.ToFloat64(e.metrics.kills.WithLabelValues("Liveness", KillOutcomeError)); got != 2 {
		t.Errorf("kills{outcome=error} = %v, want 2", got)
	}

	e.killer.mu.Lock()
	e.killer.err = nil
	e.killer.mu.Unlock()
	expectContinue(t, w, "retry succeeds")
	expectContinue(t, w, "nothing left to do")
	if n := len(e.killer.calls()); n != 3 {
		t.Fatalf("kill attempts = %d, want 3", n)
	}

	// A container that is no longer running is not killed again.
	e.killer.err = errors.New("still failing")
	expectContinue(t, w, "kill fails again") // not called: killPending is false
	stopped := pod.DeepCopy()
	stopped.Status.ContainerStatuses[0].State = v1.ContainerState{Terminated: &v1.ContainerStateTerminated{ExitCode: 137}}
	w.killPending = true
	e.pods.set(stopped)
	expectContinue(t, w, "terminated")
	if n := len(e.killer.calls()); n != 3 {
		t.Errorf("kill attempts = %d, want 3", n)
	}
	if e.prober.count() != 1 {
		t.Errorf("probed %d times on hold", e.prober.count())
	}
}

// deferral is how pkg/kill says it held a kill back on purpose.
type deferral struct{}

func (deferral) Error() string  { return "restart deferred: budget spent" }
func (deferral) Deferred() bool { return true }

// A kill the restart guard holds back by design is retried like a failed
// one, but counted under its own outcome, so the ProbedContainerKillsFailing
// alert (outcome="error") does not fire on a designed pause.
func TestDeferredKillIsNotAnError(t *testing.T) {
	e, w := newEnv(t, probespec.Liveness, v1.Probe{FailureThreshold: 1})
	e.pods.set(runningPod(epoch))
	e.prober.set(results.Failure)
	e.killer.err = fmt.Errorf("wrapped: %w", deferral{})
	expectContinue(t, w, "failure at threshold")
	expectContinue(t, w, "retry while deferred")
	if n := len(e.killer.calls()); n != 2 {
		t.Fatalf("kill attempts = %d, want 2", n)
	}
	// /debug/probes and kubectl probed status say why, while it lasts.
	if got := w.Snapshot().RestartDeferred; got != "wrapped: restart deferred: budget spent" {
		t.Errorf("Snapshot().RestartDeferred = %q while deferred", got)
	}
	e.killer.err = nil
	expectContinue(t, w, "retry goes through")
	if got := w.Snapshot().RestartDeferred; got != "" {
		t.Errorf("Snapshot().RestartDeferred = %q after the kill went through, want none", got)
	}
	for outcome, want := range map[string]float64{KillOutcomeDeferred: 2, KillOutcomeError: 0, KillOutcomeSuccess: 1} {
		if got := testutil.ToFloat64(e.metrics.kills.WithLabelValues("Liveness", outcome)); got != want {
			t.Errorf("kills{outcome=%s} = %v, want %v", outcome, got, want)
		}
	}
}

// A kill that failed (or was deferred) is not retried once the pod is being
// deleted: the kubelet is stopping the container already.
func TestPendingKillDroppedOnPodDeletion(t *testing.T) {
	e, w := newEnv(t, probespec.Liveness, v1.Probe{FailureThreshold: 1})
	pod := runningPod(epoch)
	e.pods.set(pod)
	e.prober.set(results.Failure)
	e.killer.err = errors.New("deferred")
	expectContinue(t, w, "failure at threshold")
	deleting := pod.DeepCopy()
	now := metav1.NewTime(epoch)
	deleting.DeletionTimestamp = &now
	e.pods.set(deleting)
	expectContinue(t, w, "on hold, pod deleting")
	expectContinue(t, w, "still on hold")
	if n := len(e.killer.calls()); n != 1 {
		t.Fatalf("kill attempts = %d, want 1 (none after deletion)", n)
	}
}

func TestNilKiller(t *testing.T) {
	e, w := newEnv(t, probespec.Liveness, v1.Probe{FailureThreshold: 1}, func(c *Config) { c.Killer = nil })
	e.pods.set(runningPod(epoch))
	e.prober.set(results.Failure)
	expectContinue(t, w, "failure without killer")
	expectResult(t, e, testID, results.Failure, "failure without killer")
	if !w.onHold {
		t.Error("not on hold")
	}
}

func TestNewPanicsWithoutRequiredFields(t *testing.T) {
	defer func() {
		if recover() == nil {
			t.Error("New accepted an empty Config")
		}
	}()
	New(Config{})
}

func TestDefaults(t *testing.T) {
	w := New(Config{Container: &v1.Container{Name: testContainer}, Spec: defaulted(v1.Probe{}), Prober: newFakeProber(epochClock{}), Pods: &fakePods{}, Results: results.NewManager()})
	if w.cfg.Clock == nil || w.cfg.Rand == nil {
		t.Fatal("defaults not filled in")
	}
	if r := w.cfg.Rand(); r < 0 || r >= 1 {
		t.Errorf("Rand() = %v", r)
	}
	if w.Snapshot().State != StatePending {
		t.Errorf("initial state = %q", w.Snapshot().State)
	}
}

type epochClock struct{}

func (epochClock) Now() time.Time                  { return epoch }
func (epochClock) Since(t time.Time) time.Duration { return epoch.Sub(t) }

// The result a worker publishes carries the output of the probe that
// decided it: a readiness probe that fails from its first run publishes its
// output with the failure (the initial Failure had none), repeats keep the
// deciding probe's text, and the flip back to success carries no text at
// all (a success's output never reaches pod status).
func TestPublishedResultCarriesTheDecidingOutput(t *testing.T) {
	e, w := newEnv(t, probespec.Readiness, v1.Probe{FailureThreshold: 1})
	e.pods.set(runningPod(epoch.Add(-time.Minute)))
	e.prober.mu.Lock()
	e.prober.result, e.prober.output = results.Failure, "first failure"
	e.prober.mu.Unlock()

	expectContinue(t, w, "first probe")
	v, _ := e.results.Get(testID)
	if v.Result != results.Failure || !v.Probed || v.Output != "first failure" {
		t.Fatalf("after the first failing probe: %+v; want its output with the failure", v)
	}
	e.prober.mu.Lock()
	e.prober.output = "second failure"
	e.prober.mu.Unlock()
	expectContinue(t, w, "second probe")
	if v, _ := e.results.Get(testID); v.Output != "first failure" {
		t.Errorf("after a repeated failure: output %q; want the deciding probe's", v.Output)
	}
	e.prober.mu.Lock()
	e.prober.result, e.prober.output = results.Success, "a body that must not be published"
	e.prober.mu.Unlock()
	expectContinue(t, w, "third probe")
	if v, _ := e.results.Get(testID); v.Result != results.Success || v.Output != "" {
		t.Errorf("after the flip to success: %+v; want Success with no text", v)
	}
}

// The kept text is bounded and does not pin the probe's 10 KiB output.
func TestDecidingOutputIsBounded(t *testing.T) {
	long := strings.Repeat("é", 3000) // 6,000 bytes, 2-byte runes
	got := decidingOutput(results.Failure, long)
	if len(got) > maxDecidingOutput || !utf8.ValidString(got) || !strings.HasPrefix(long, got) {
		t.Errorf("decidingOutput kept %d bytes (valid UTF-8: %v)", len(got), utf8.ValidString(got))
	}
	if unsafe.StringData(got) == unsafe.StringData(long) {
		t.Error("the kept text shares the probe output's memory")
	}
}

// The pod's deletion begins while a failing liveness probe is in flight:
// the result read before the probe is stale, and the kill must not happen
// (the kubelet never restarts a container of a terminating pod). The worker
// ends as it would at the top of a step: Success, stopped.
func TestNoKillWhenDeletionBeganDuringTheProbe(t *testing.T) {
	for _, pt := range []probespec.ProbeType{probespec.Liveness, probespec.Startup} {
		t.Run(pt.String(), func(t *testing.T) {
			e, w := newEnv(t, pt, v1.Probe{FailureThreshold: 1})
			pod := runningPod(epoch)
			e.pods.set(pod)
			e.prober.set(results.Failure)
			deleting := pod.DeepCopy()
			now := metav1.NewTime(epoch)
			deleting.DeletionTimestamp = &now
			// The step reads the running pod; while its probe runs, the
			// deletion begins.
			e.prober.gate = make(chan struct{})
			go func() {
				recv(t, e.prober.calls, "the probe")
				e.pods.set(deleting)
				e.prober.gate <- struct{}{}
			}()
			if w.doProbe(context.Background()) {
				t.Error("the worker went on; want it to end as for a deleted pod")
			}
			if n := len(e.killer.calls()); n != 0 {
				t.Errorf("killed %d times during the pod's termination", n)
			}
			expectResult(t, e, testID, results.Success, "after deletion began")
		})
	}
}
