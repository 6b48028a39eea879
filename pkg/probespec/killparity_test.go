package probespec

import (
	"reflect"
	"testing"

	v1 "k8s.io/api/core/v1"
)

// Issue 31, 1b: an annotation's liveness or startup probe whose kill by
// probed would not be followed by the kubelet's restart (a Job under
// restartPolicy OnFailure whose app exits 0 on SIGTERM would complete) is
// refused with the reason and the fix, by the daemon, the validating
// webhook and the CLI alike (they all come here); its readiness probe, and
// probes where the kill restarts as the kubelet's would, still run. The
// same probes in the pod spec (--probe-source=spec) are the node's only
// probes and are run as before.
func TestKillParityRefusesAnnotationProbes(t *testing.T) {
	onFailure, always, never := v1.ContainerRestartPolicyOnFailure, v1.ContainerRestartPolicyAlways, v1.ContainerRestartPolicyNever
	const probes = `{"app": {"livenessProbe": {"exec": {"command": ["l"]}}, "readinessProbe": {"exec": {"command": ["r"]}}, "startupProbe": {"exec": {"command": ["s"]}}}}`
	onFailureLiveness := `container "app" livenessProbe: Forbidden: under restartPolicy OnFailure the kubelet restarts a container its liveness probe killed whatever its exit code, ` +
		`one probed stopped only if it exits non-zero, so probed does not run it; declare it as the container's livenessProbe in the pod spec, where the kubelet runs it`
	onFailureStartup := `container "app" startupProbe: Forbidden: under restartPolicy OnFailure the kubelet restarts a container its startup probe killed whatever its exit code, ` +
		`one probed stopped only if it exits non-zero, so probed does not run it; declare it as the container's startupProbe in the pod spec, where the kubelet runs it`
	for _, tc := range []struct {
		name         string
		pod          v1.RestartPolicy
		container    *v1.ContainerRestartPolicy
		rules        []v1.ContainerRestartRule
		wantProbes   []string
		wantProblems []string
	}{
		{"pod OnFailure", v1.RestartPolicyOnFailure, nil, nil,
			[]string{"app/Readiness/ann"}, []string{onFailureLiveness, onFailureStartup}},
		{"the container's own OnFailure", v1.RestartPolicyAlways, &onFailure, nil,
			[]string{"app/Readiness/ann"}, []string{
				`container "app" livenessProbe: Forbidden: under restartPolicy OnFailure (the container's) the kubelet restarts a container its liveness probe killed whatever its exit code, ` +
					`one probed stopped only if it exits non-zero, so probed does not run it; declare it as the container's livenessProbe in the pod spec, where the kubelet runs it`,
				`container "app" startupProbe: Forbidden: under restartPolicy OnFailure (the container's) the kubelet restarts a container its startup probe killed whatever its exit code, ` +
					`one probed stopped only if it exits non-zero, so probed does not run it; declare it as the container's startupProbe in the pod spec, where the kubelet runs it`}},
		{"a RestartAllContainers rule the stop's exit could match", v1.RestartPolicyAlways, &always,
			[]v1.ContainerRestartRule{{Action: v1.ContainerRestartRuleActionRestartAllContainers,
				ExitCodes: &v1.ContainerRestartRuleOnExitCodes{Operator: v1.ContainerRestartRuleOnExitCodesOpIn, Values: []int32{143}}}},
			[]string{"app/Readiness/ann"}, []string{
				`container "app" livenessProbe: Forbidden: under restartPolicy Always (the container's) the kubelet restarts a container its liveness probe killed whatever its exit code, ` +
					`one probed stopped its exit code and restartPolicyRules decide, so probed does not run it; declare it as the container's livenessProbe in the pod spec, where the kubelet runs it`,
				`container "app" startupProbe: Forbidden: under restartPolicy Always (the container's) the kubelet restarts a container its startup probe killed whatever its exit code, ` +
					`one probed stopped its exit code and restartPolicyRules decide, so probed does not run it; declare it as the container's startupProbe in the pod spec, where the kubelet runs it`}},
		{"pod Always: restarted either way", v1.RestartPolicyAlways, nil, nil,
			[]string{"app/Liveness/ann", "app/Readiness/ann", "app/Startup/ann"}, nil},
		{"pod Never: restarted by neither", v1.RestartPolicyNever, nil, nil,
			[]string{"app/Liveness/ann", "app/Readiness/ann", "app/Startup/ann"}, nil},
		{"the container's own Never in an OnFailure pod", v1.RestartPolicyOnFailure, &never, nil,
			[]string{"app/Liveness/ann", "app/Readiness/ann", "app/Startup/ann"}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pod := testPod(probes)
			pod.Spec.RestartPolicy = tc.pod
			pod.Spec.Containers[0].RestartPolicy = tc.container
			pod.Spec.Containers[0].RestartPolicyRules = tc.rules
			got, problems := DeclaredProbes(pod, ProbeSourceAnnotation)
			if keys := probeKeysOf(got); !reflect.DeepEqual(keys, tc.wantProbes) {
				t.Errorf("probes run: %q, want %q", keys, tc.wantProbes)
			}
			if ps := problemStrings(problems); !reflect.DeepEqual(ps, tc.wantProblems) {
				t.Errorf("problems:\n got %q\nwant %q", ps, tc.wantProblems)
			}
		})
	}

	// From the pod spec, on a node where nothing else runs them.
	pod := testPod("-")
	pod.Spec.RestartPolicy = v1.RestartPolicyOnFailure
	pod.Spec.Containers[0].LivenessProbe = &v1.Probe{ProbeHandler: v1.ProbeHandler{Exec: &v1.ExecAction{Command: []string{"l"}}}}
	if got, problems := DeclaredProbes(pod, ProbeSourceSpec); len(got) != 1 || len(problems) != 0 {
		t.Errorf("spec probe under OnFailure: %q, %q; want it run", probeKeysOf(got), problemStrings(problems))
	}
}
