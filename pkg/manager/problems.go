package manager

import (
	"sort"
	"strings"

	v1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"

	"github.com/probed-dev/probed/pkg/probespec"
)

// ReasonInvalidProbe is the event reason for a probe probed will not run.
const ReasonInvalidProbe = "InvalidProbe"

// recordProblemsLocked remembers which readiness and startup probes are
// invalid, for their conditions, and reports whether the problem set changed
// since it was last reported, so events are not repeated on every sync.
func (m *Manager) recordProblemsLocked(e *podEntry, problems []probespec.ProbeProblem) bool {
	e.invalid = map[probeKey]string{}
	msgs := make([]string, 0, len(problems))
	for _, p := range problems {
		msgs = append(msgs, p.String())
		if p.Type != nil && p.Container != "" && (*p.Type == probespec.Readiness || *p.Type == probespec.Startup) {
			k := probeKey{p.Container, *p.Type}
			if prev, ok := e.invalid[k]; ok {
				e.invalid[k] = prev + "; " + p.String()
			} else {
				e.invalid[k] = p.String()
			}
		}
	}
	sort.Strings(msgs)
	sig := strings.Join(msgs, "\n")
	changed := sig != e.problems
	e.problems = sig
	return changed && sig != ""
}

// reportProblems logs each problem and raises an InvalidProbe Warning on the
// container it names, or on the pod when it names none that exists.
func (m *Manager) reportProblems(pod *v1.Pod, problems []probespec.ProbeProblem) {
	for _, p := range problems {
		klog.InfoS("Invalid probe", "pod", klog.KObj(pod), "container", p.Container, "problem", p.String())
		if m.opts.Recorder == nil {
			continue
		}
		container := p.Container
		if !hasContainer(pod, container) {
			container = ""
		}
		m.opts.Recorder.Event(pod, container, v1.EventTypeWarning, ReasonInvalidProbe, p.String())
	}
}

func hasContainer(pod *v1.Pod, name string) bool {
	if name == "" {
		return false
	}
	for _, c := range pod.Spec.Containers {
		if c.Name == name {
			return true
		}
	}
	for _, c := range pod.Spec.InitContainers {
		if c.Name == name {
			return true
		}
	}
	return false
}
