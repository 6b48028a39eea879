package restartpolicy

import (
	"testing"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func ptr[T any](v T) *T { return &v }

func rule(action v1.ContainerRestartRuleAction, op v1.ContainerRestartRuleOnExitCodesOperator, codes ...int32) v1.ContainerRestartRule {
	return v1.ContainerRestartRule{Action: action, ExitCodes: &v1.ContainerRestartRuleOnExitCodes{Operator: op, Values: codes}}
}

// The cases of the kubelet's ContainerShouldRestart (pkg/api/v1/pod,
// v1.37) and its tests, with RestartAllContainers on (beta from 1.36).
func TestAfterExit(t *testing.T) {
	always, onFailure, never := v1.ContainerRestartPolicyAlways, v1.ContainerRestartPolicyOnFailure, v1.ContainerRestartPolicyNever
	for _, tc := range []struct {
		name      string
		pod       v1.RestartPolicy
		container *v1.ContainerRestartPolicy
		rules     []v1.ContainerRestartRule
		code      int32
		want      Outcome
	}{
		{"pod Always, exit 0", v1.RestartPolicyAlways, nil, nil, 0, Restart},
		{"pod unset is Always", "", nil, nil, 0, Restart},
		{"pod OnFailure, exit 0", v1.RestartPolicyOnFailure, nil, nil, 0, NoRestart},
		{"pod OnFailure, exit 143", v1.RestartPolicyOnFailure, nil, nil, 143, Restart},
		{"pod Never, exit 1", v1.RestartPolicyNever, nil, nil, 1, NoRestart},
		{"container Always wins over pod Never", v1.RestartPolicyNever, &always, nil, 0, Restart},
		{"container OnFailure in an Always pod, exit 0", v1.RestartPolicyAlways, &onFailure, nil, 0, NoRestart},
		{"container Never in an Always pod", v1.RestartPolicyAlways, &never, nil, 137, NoRestart},
		{"rule In matches", v1.RestartPolicyNever, &never, []v1.ContainerRestartRule{rule("Restart", "In", 42)}, 42, Restart},
		{"rule In misses", v1.RestartPolicyNever, &never, []v1.ContainerRestartRule{rule("Restart", "In", 42)}, 43, NoRestart},
		{"rule NotIn matches", v1.RestartPolicyNever, &never, []v1.ContainerRestartRule{rule("Restart", "NotIn", 0)}, 143, Restart},
		{"rule NotIn misses", v1.RestartPolicyNever, &never, []v1.ContainerRestartRule{rule("Restart", "NotIn", 0)}, 0, NoRestart},
		{"first matching rule wins", v1.RestartPolicyNever, &never, []v1.ContainerRestartRule{
			rule("RestartAllContainers", "In", 3), rule("Restart", "In", 3)}, 3, RestartAll},
		{"rule without exit codes never matches", v1.RestartPolicyNever, &never, []v1.ContainerRestartRule{{Action: "Restart"}}, 1, NoRestart},
		{"unknown operator never matches", v1.RestartPolicyNever, &never, []v1.ContainerRestartRule{rule("Restart", "Maybe", 1)}, 1, NoRestart},
		{"unknown action falls back to the policy", v1.RestartPolicyNever, &onFailure, []v1.ContainerRestartRule{rule("Explode", "In", 0)}, 0, NoRestart},
		{"rules need the container's own policy", v1.RestartPolicyNever, nil, []v1.ContainerRestartRule{rule("Restart", "In", 1)}, 1, NoRestart},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := &v1.Container{Name: "app", RestartPolicy: tc.container, RestartPolicyRules: tc.rules}
			spec := &v1.PodSpec{RestartPolicy: tc.pod, Containers: []v1.Container{*c}}
			if got := AfterExit(spec, c, tc.code); got != tc.want {
				t.Errorf("AfterExit = %v, want %v", got, tc.want)
			}
		})
	}
}

// computePodActions' "restart" after the kubelet's own liveness or startup
// kill, and KillParity: where probed's stop differs.
func TestAfterKubeletKillAndParity(t *testing.T) {
	always, onFailure, never := v1.ContainerRestartPolicyAlways, v1.ContainerRestartPolicyOnFailure, v1.ContainerRestartPolicyNever
	sidecar := v1.Container{Name: "proxy", RestartPolicy: &always}
	for _, tc := range []struct {
		name        string
		pod         v1.RestartPolicy
		c           v1.Container
		kubelet     bool // restarted in the same pass by the kubelet
		parity      bool
		stopOutcome AfterStop
	}{
		{"pod Always", v1.RestartPolicyAlways, v1.Container{Name: "app"}, true, true, AfterStop{All: true}},
		{"pod OnFailure: exit 0 after SIGTERM is the end", v1.RestartPolicyOnFailure, v1.Container{Name: "app"}, true, false, AfterStop{AllButZero: true}},
		{"pod Never", v1.RestartPolicyNever, v1.Container{Name: "app"}, false, true, AfterStop{None: true}},
		{"container Always in a Never pod", v1.RestartPolicyNever, v1.Container{Name: "app", RestartPolicy: &always}, true, true, AfterStop{All: true}},
		{"container OnFailure in an Always pod", v1.RestartPolicyAlways, v1.Container{Name: "app", RestartPolicy: &onFailure}, true, false, AfterStop{AllButZero: true}},
		{"container OnFailure with a rule restarting on 0", v1.RestartPolicyNever, v1.Container{Name: "app", RestartPolicy: &onFailure,
			RestartPolicyRules: []v1.ContainerRestartRule{rule("Restart", "In", 0)}}, true, true, AfterStop{All: true}},
		{"container Never with a rule: both end in the rule", v1.RestartPolicyNever, v1.Container{Name: "app", RestartPolicy: &never,
			RestartPolicyRules: []v1.ContainerRestartRule{rule("Restart", "In", 143)}}, false, true, AfterStop{}},
		{"container Always with a RestartAllContainers rule on 143", v1.RestartPolicyAlways, v1.Container{Name: "app", RestartPolicy: &always,
			RestartPolicyRules: []v1.ContainerRestartRule{rule("RestartAllContainers", "In", 143)}}, true, false, AfterStop{}},
		{"sidecar in a Never pod", v1.RestartPolicyNever, sidecar, true, true, AfterStop{All: true}},
		{"sidecar in an OnFailure pod", v1.RestartPolicyOnFailure, sidecar, true, true, AfterStop{All: true}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			spec := &v1.PodSpec{RestartPolicy: tc.pod, Containers: []v1.Container{{Name: "main"}}}
			if tc.c.Name == "proxy" {
				spec.InitContainers = []v1.Container{tc.c}
			} else {
				spec.Containers = append(spec.Containers, tc.c)
			}
			if got := AfterKubeletKill(spec, &tc.c); got != tc.kubelet {
				t.Errorf("AfterKubeletKill = %v, want %v", got, tc.kubelet)
			}
			if got := KillParity(spec, &tc.c); got != tc.parity {
				t.Errorf("KillParity = %v, want %v", got, tc.parity)
			}
			if got := StopOutcome(spec, &tc.c); got != tc.stopOutcome {
				t.Errorf("StopOutcome = %+v, want %+v", got, tc.stopOutcome)
			}
		})
	}
}

// The kubelet's worker keeps going on a terminated container that will run
// again, by its own rules or because every container is restarting.
func TestWillRunAgain(t *testing.T) {
	never := v1.ContainerRestartPolicyNever
	all := rule("RestartAllContainers", "In", 7)
	pod := &v1.Pod{Spec: v1.PodSpec{
		RestartPolicy: v1.RestartPolicyNever,
		Containers: []v1.Container{
			{Name: "app"},
			{Name: "trigger", RestartPolicy: &never, RestartPolicyRules: []v1.ContainerRestartRule{all}},
		},
	}}
	if WillRunAgain(pod, "app", 1) {
		t.Error("app in a Never pod will run again, alone")
	}
	pod.Status.ContainerStatuses = []v1.ContainerStatus{
		{Name: "trigger", State: v1.ContainerState{Terminated: &v1.ContainerStateTerminated{ExitCode: 7}}},
	}
	if !WillRunAgain(pod, "app", 1) {
		t.Error("app will run again when trigger exited 7 (RestartAllContainers)")
	}
	pod.Status.ContainerStatuses[0].State.Terminated.ExitCode = 8
	if WillRunAgain(pod, "app", 1) {
		t.Error("trigger exited 8: no rule matches")
	}
	pod.Status.Conditions = []v1.PodCondition{{Type: v1.AllContainersRestarting, Status: v1.ConditionTrue, LastTransitionTime: metav1.Now()}}
	if !WillRunAgain(pod, "app", 1) {
		t.Error("AllContainersRestarting=True: every container runs again")
	}
}

// computePodActions' KillPod after the kubelet's own liveness or startup
// kill of "app": app is a regular container it would not restart, and no
// other regular container runs or will be started.
func TestKillsPod(t *testing.T) {
	always, onFailure, never := v1.ContainerRestartPolicyAlways, v1.ContainerRestartPolicyOnFailure, v1.ContainerRestartPolicyNever
	running := v1.ContainerState{Running: &v1.ContainerStateRunning{}}
	exited := func(code int32) v1.ContainerState {
		return v1.ContainerState{Terminated: &v1.ContainerStateTerminated{ExitCode: code}}
	}
	waiting := v1.ContainerState{Waiting: &v1.ContainerStateWaiting{Reason: "CrashLoopBackOff"}}
	type other struct {
		policy *v1.ContainerRestartPolicy
		state  *v1.ContainerState // nil: no status yet
	}
	pod := func(p v1.RestartPolicy, app *v1.ContainerRestartPolicy, others ...other) *v1.Pod {
		pod := &v1.Pod{Spec: v1.PodSpec{RestartPolicy: p,
			InitContainers: []v1.Container{{Name: "proxy", RestartPolicy: &always}},
			Containers:     []v1.Container{{Name: "app", RestartPolicy: app}}}}
		pod.Status.InitContainerStatuses = []v1.ContainerStatus{{Name: "proxy", State: running}}
		pod.Status.ContainerStatuses = []v1.ContainerStatus{{Name: "app", State: running}}
		for i, o := range others {
			name := string(rune('b' + i))
			pod.Spec.Containers = append(pod.Spec.Containers, v1.Container{Name: name, RestartPolicy: o.policy})
			if o.state != nil {
				pod.Status.ContainerStatuses = append(pod.Status.ContainerStatuses, v1.ContainerStatus{Name: name, State: *o.state})
			}
		}
		return pod
	}
	ex0, ex1 := exited(0), exited(1)
	restartingAll := pod(v1.RestartPolicyNever, nil)
	restartingAll.Status.Conditions = []v1.PodCondition{{Type: v1.AllContainersRestarting, Status: v1.ConditionTrue}}
	for _, tc := range []struct {
		name string
		pod  *v1.Pod
		c    string
		want bool
	}{
		{"Never pod, its only app container (a sidecar beside)", pod(v1.RestartPolicyNever, nil), "app", true},
		{"Never pod, another app container runs", pod(v1.RestartPolicyNever, nil, other{nil, &running}), "app", false},
		{"Never pod, the other app container has exited", pod(v1.RestartPolicyNever, nil, other{nil, &ex1}), "app", true},
		{"Never pod, the other waits to restart", pod(v1.RestartPolicyNever, nil, other{&always, &waiting}), "app", false},
		{"Never pod, the other is not created yet", pod(v1.RestartPolicyNever, nil, other{nil, nil}), "app", false},
		{"Never pod, the other exited and will restart (its own Always)", pod(v1.RestartPolicyNever, nil, other{&always, &ex0}), "app", false},
		{"Never pod, the other exited 1 under its own OnFailure", pod(v1.RestartPolicyNever, nil, other{&onFailure, &ex1}), "app", false},
		{"Never pod, the other exited 0 under its own OnFailure", pod(v1.RestartPolicyNever, nil, other{&onFailure, &ex0}), "app", true},
		{"Always pod: restarted in the same pass", pod(v1.RestartPolicyAlways, nil), "app", false},
		{"OnFailure pod: restarted in the same pass", pod(v1.RestartPolicyOnFailure, nil), "app", false},
		{"Never pod, app's own Always", pod(v1.RestartPolicyNever, &always), "app", false},
		{"Always pod, app's own Never, alone", pod(v1.RestartPolicyAlways, &never), "app", true},
		{"Always pod, app's own Never, the other exited and restarts", pod(v1.RestartPolicyAlways, &never, other{nil, &ex0}), "app", false},
		{"a sidecar is restarted whatever the pod's policy", pod(v1.RestartPolicyNever, nil), "proxy", false},
		{"all containers restarting", restartingAll, "app", false},
		{"no such container", pod(v1.RestartPolicyNever, nil), "nope", false},
		{"no pod", nil, "app", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := KillsPod(tc.pod, tc.c); got != tc.want {
				t.Errorf("KillsPod = %v, want %v", got, tc.want)
			}
		})
	}
}
