package probespec

import (
	"fmt"
	"strings"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/probed-dev/probed/pkg/restartpolicy"
)

// killParityGap says how a liveness or startup kill of c by probed would
// not lead to the restart the kubelet's own kill leads to
// (restartpolicy.KillParity), or "" when it would.
func killParityGap(spec *v1.PodSpec, c *v1.Container, t ProbeType) string {
	if t == Readiness || restartpolicy.KillParity(spec, c) {
		return ""
	}
	policy := string(spec.RestartPolicy)
	if c.RestartPolicy != nil {
		policy = string(*c.RestartPolicy) + " (the container's)"
	}
	after := "its exit code and restartPolicyRules decide"
	if restartpolicy.StopOutcome(spec, c).AllButZero {
		after = "only if it exits non-zero"
	}
	return fmt.Sprintf("under restartPolicy %s the kubelet restarts a container its %s probe killed whatever its exit code, one probed stopped %s",
		policy, strings.ToLower(t.String()), after)
}

// checkKillParity refuses a liveness or startup probe of the annotation
// whose kill by probed would not be followed by the kubelet's restart
// (contract §3: such a probe is left to the kubelet or refused, never
// silently weakened). Under restartPolicy OnFailure an app that exits 0 on
// SIGTERM would end its Job as if it had completed; the kubelet, running
// the same probe from the pod spec, restarts it. Adoption leaves such spec
// probes with the kubelet; in the annotation there is no kubelet to leave
// them to, so the fix is to declare the probe in the pod spec.
func checkKillParity(spec *v1.PodSpec, c *v1.Container, t ProbeType, path *field.Path) field.ErrorList {
	gap := killParityGap(spec, c, t)
	if gap == "" {
		return nil
	}
	return field.ErrorList{field.Forbidden(path, fmt.Sprintf(
		"%s, so probed does not run it; declare it as the container's %s in the pod spec, where the kubelet runs it",
		gap, path.String()))}
}
