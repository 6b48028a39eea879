// Package restartpolicy says, as the kubelet decides it, whether a
// container runs again after it ends: the pod's restartPolicy and, from
// Kubernetes 1.35 (KEP-5307, on by default), the container's own
// restartPolicy and restartPolicyRules. It is the one place probed asks:
//   - the worker, whether a terminated container will run again (if not,
//     its worker ends, as the kubelet's does);
//   - the Killing event, whether "will be restarted" is true;
//   - adoption and the daemon, whether a liveness or startup kill by probed
//     leads to what the kubelet's own kill leads to (KillParity).
//
// The rules are read from the kubelet's v1.37 source: podutil's
// ContainerShouldRestart and FindMatchingContainerRestartRule
// (pkg/api/v1/pod), kubecontainer's ShouldAllContainersRestart
// (pkg/kubelet/container), and the restart decision of computePodActions
// and computeInitContainerActions (pkg/kubelet/kuberuntime). The package
// depends on nothing but the API types.
package restartpolicy

import (
	v1 "k8s.io/api/core/v1"
)

// Outcome is what the kubelet does with a container that ended.
type Outcome int

const (
	// NoRestart: the container stays terminated.
	NoRestart Outcome = iota
	// Restart: the container runs again.
	Restart
	// RestartAll: a RestartAllContainers rule matched; every container of
	// the pod runs again, this one included.
	RestartAll
)

// IsSidecar reports whether c is a restartable init container: an init
// container with restartPolicy Always. The kubelet always runs it again.
func IsSidecar(spec *v1.PodSpec, name string) bool {
	for i := range spec.InitContainers {
		if spec.InitContainers[i].Name == name {
			rp := spec.InitContainers[i].RestartPolicy
			return rp != nil && *rp == v1.ContainerRestartPolicyAlways
		}
	}
	return false
}

// AfterExit is the kubelet's decision for container c of spec once it has
// exited with exitCode (ContainerShouldRestart): the container's
// restartPolicyRules first, in order, then its own restartPolicy, then the
// pod's. Rules count only on a container with its own restartPolicy, as the
// API requires.
func AfterExit(spec *v1.PodSpec, c *v1.Container, exitCode int32) Outcome {
	if c.RestartPolicy != nil {
		if rule, ok := matchingRule(c, exitCode); ok {
			switch rule.Action {
			case v1.ContainerRestartRuleActionRestart:
				return Restart
			case v1.ContainerRestartRuleActionRestartAllContainers:
				return RestartAll
			}
		}
		switch *c.RestartPolicy {
		case v1.ContainerRestartPolicyAlways:
			return Restart
		case v1.ContainerRestartPolicyOnFailure:
			return onFailure(exitCode)
		case v1.ContainerRestartPolicyNever:
			return NoRestart
		}
	}
	switch spec.RestartPolicy {
	case v1.RestartPolicyOnFailure:
		return onFailure(exitCode)
	case v1.RestartPolicyNever:
		return NoRestart
	}
	return Restart // Always, and the API's default
}

func onFailure(exitCode int32) Outcome {
	if exitCode != 0 {
		return Restart
	}
	return NoRestart
}

// matchingRule is the first rule whose exit codes match (In: listed; NotIn:
// not listed). A rule with no exitCodes, or an unknown operator, never
// matches.
func matchingRule(c *v1.Container, exitCode int32) (v1.ContainerRestartRule, bool) {
	for _, rule := range c.RestartPolicyRules {
		if rule.ExitCodes == nil {
			continue
		}
		listed := false
		for _, v := range rule.ExitCodes.Values {
			listed = listed || v == exitCode
		}
		switch rule.ExitCodes.Operator {
		case v1.ContainerRestartRuleOnExitCodesOpIn:
			if listed {
				return rule, true
			}
		case v1.ContainerRestartRuleOnExitCodesOpNotIn:
			if !listed {
				return rule, true
			}
		}
	}
	return v1.ContainerRestartRule{}, false
}

// AllContainersRestarting reports whether the kubelet is restarting every
// container of the pod (ShouldAllContainersRestart on the API status): the
// AllContainersRestarting condition is True, or a container terminated with
// an exit code that a RestartAllContainers rule of its own matches.
func AllContainersRestarting(pod *v1.Pod) bool {
	for _, cond := range pod.Status.Conditions {
		if cond.Type == v1.AllContainersRestarting && cond.Status == v1.ConditionTrue {
			return true
		}
	}
	terminated := map[string]int32{}
	for _, list := range [][]v1.ContainerStatus{pod.Status.InitContainerStatuses, pod.Status.ContainerStatuses} {
		for i := range list {
			if t := list[i].State.Terminated; t != nil {
				terminated[list[i].Name] = t.ExitCode
			}
		}
	}
	for _, list := range [][]v1.Container{pod.Spec.InitContainers, pod.Spec.Containers} {
		for i := range list {
			code, ok := terminated[list[i].Name]
			if !ok {
				continue
			}
			if rule, ok := matchingRule(&list[i], code); ok && rule.Action == v1.ContainerRestartRuleActionRestartAllContainers {
				return true
			}
		}
	}
	return false
}

// WillRunAgain is the kubelet worker's question about the named container,
// terminated with exitCode (worker.go's doProbe): will the kubelet start it
// again? A probe worker whose container will not run again ends.
func WillRunAgain(pod *v1.Pod, name string, exitCode int32) bool {
	return AfterExit(&pod.Spec, Container(&pod.Spec, name), exitCode) != NoRestart || AllContainersRestarting(pod)
}

// Container finds the named container in spec, among the init containers,
// then the regular ones; a container with that name and nothing else (the
// pod's policy alone decides) if there is none.
func Container(spec *v1.PodSpec, name string) *v1.Container {
	for _, list := range [][]v1.Container{spec.InitContainers, spec.Containers} {
		for i := range list {
			if list[i].Name == name {
				return &list[i]
			}
		}
	}
	return &v1.Container{Name: name}
}

// AfterKubeletKill is the kubelet's decision when its own liveness or
// startup probe fails (computePodActions, computeInitContainerActions):
// true means the container is killed and started again in the same pass,
// whatever its exit code, and the Killing text ends in ", will be
// restarted"; false means it is only killed, and what follows is AfterExit
// of the code it exits with. A sidecar always runs again; a regular
// container unless its own restartPolicy, or without one the pod's, is
// Never. restartPolicyRules do not count here: the container has not exited.
func AfterKubeletKill(spec *v1.PodSpec, c *v1.Container) bool {
	if IsSidecar(spec, c.Name) {
		return true
	}
	if c.RestartPolicy != nil {
		return *c.RestartPolicy != v1.ContainerRestartPolicyNever
	}
	return spec.RestartPolicy != v1.RestartPolicyNever
}

// exitCodes are the codes a stopped container can exit with: its own
// exit(0..255), or 128+N for signal N; runtimes report no others.
const maxExitCode = 255

// AfterStop is what the kubelet does once probed has stopped c (which, to
// the kubelet, is an ordinary exit), for each exit code the container may
// choose: the set of codes after which it runs again. The app decides its
// own code: 0 if it handles SIGTERM and exits cleanly, 143 if it does not
// handle it, 137 after SIGKILL, anything else it likes.
type AfterStop struct {
	// All: every exit code leads to Restart (never RestartAll).
	All bool
	// None: no exit code leads to a restart of any kind.
	None bool
	// AllButZero: every code but 0 leads to Restart, 0 to NoRestart (the
	// OnFailure policies).
	AllButZero bool
}

// StopOutcome is AfterStop for c of spec.
func StopOutcome(spec *v1.PodSpec, c *v1.Container) AfterStop {
	restart, none, zeroOnly := true, true, true
	for code := int32(0); code <= maxExitCode; code++ {
		o := AfterExit(spec, c, code)
		restart = restart && o == Restart
		none = none && o == NoRestart
		if code == 0 {
			zeroOnly = zeroOnly && o == NoRestart
		} else {
			zeroOnly = zeroOnly && o == Restart
		}
	}
	return AfterStop{All: restart, None: none, AllButZero: zeroOnly}
}

// KillParity reports whether a liveness or startup kill by probed leads
// to what the kubelet's own kill leads to, whatever code the container
// exits with. Where the kubelet would restart the container in the same
// pass (AfterKubeletKill), probed's stop must restart exactly that
// container for every exit code; where it would not, both end in AfterExit
// of the exit code and agree by construction.
//
// It fails for pods with restartPolicy OnFailure (an app that exits 0 on
// SIGTERM is never restarted after probed's stop, so a hung Job counts as
// completed), for containers whose own restartPolicy is OnFailure, and for
// containers whose RestartAllContainers rule matches a code the stop may
// produce (the kubelet's own kill restarts one container, the exit after
// probed's stop all of them).
func KillParity(spec *v1.PodSpec, c *v1.Container) bool {
	if !AfterKubeletKill(spec, c) {
		return true
	}
	return StopOutcome(spec, c).All
}

// KillsPod reports whether the kubelet's own liveness or startup kill of
// the named container would be a kill of the whole pod. computePodActions
// sets KillPod when no regular container is left to keep running or to
// start: the failing container is a regular one it would not start again
// (AfterKubeletKill is false), and every other regular container has
// terminated for good. SyncPod then stops every running container
// (killPodWithSyncResult), each with the event "Stopping container <c>"
// and the pod's grace period, the probe's terminationGracePeriodSeconds
// left aside, its sidecars after the regular containers and in reverse
// order, and then the pod's sandbox.
//
// It reads the pod's API status, which the kubelet wrote from the
// runtime's: a container with no status, or waiting, is one the kubelet
// will start.
func KillsPod(pod *v1.Pod, name string) bool {
	if pod == nil {
		return false
	}
	spec := &pod.Spec
	c := regular(spec, name)
	if c == nil || AfterKubeletKill(spec, c) || AllContainersRestarting(pod) {
		return false
	}
	for i := range spec.Containers {
		other := &spec.Containers[i]
		if other.Name == name {
			continue
		}
		t := terminated(pod, other.Name)
		if t == nil || AfterExit(spec, other, t.ExitCode) != NoRestart {
			return false
		}
	}
	return true
}

// regular finds the named regular container of spec, or nil.
func regular(spec *v1.PodSpec, name string) *v1.Container {
	for i := range spec.Containers {
		if spec.Containers[i].Name == name {
			return &spec.Containers[i]
		}
	}
	return nil
}

// terminated is the named regular container's terminated state, or nil
// while it has none (running, waiting, or not created yet).
func terminated(pod *v1.Pod, name string) *v1.ContainerStateTerminated {
	for i := range pod.Status.ContainerStatuses {
		if cs := &pod.Status.ContainerStatuses[i]; cs.Name == name {
			return cs.State.Terminated
		}
	}
	return nil
}
