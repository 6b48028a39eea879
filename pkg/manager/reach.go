package manager

import (
	v1 "k8s.io/api/core/v1"

	"github.com/probed-dev/probed/pkg/probespec"
)

// checkReach refuses the probes whose reach (what they run, or where they
// connect beyond the pod's own IP) the pod's probed.io/approved-reach does
// not cover: changed after the pod was created, by someone who may not
// create pods/exec on it (probespec.CheckReach). A refused probe is an
// InvalidProbe like any other; the pod's other probes run. It returns how
// many probes it refused.
//
// The verdict depends on the pod object alone, so an edit made while probed
// was down is judged the same when it comes back.
func (m *Manager) checkReach(pod *v1.Pod, declared []probespec.DeclaredProbe, problems []probespec.ProbeProblem) ([]probespec.DeclaredProbe, []probespec.ProbeProblem, int) {
	before := len(problems)
	declared, problems = probespec.CheckReach(pod, declared, problems, m.opts.RequireApprovedReach)
	return declared, problems, len(problems) - before
}

// setUnapprovedLocked records how many of a pod's probes are refused for
// their reach, for probed_probes_unapproved_reach.
func (m *Manager) setUnapprovedLocked(e *podEntry, n int) {
	m.unapproved += n - e.unapproved
	e.unapproved = n
	m.opts.Metrics.setUnapproved(m.unapproved)
}
