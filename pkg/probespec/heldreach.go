package probespec

import (
	"fmt"
	"strings"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// ReachRecord is what a node recorded of a pod's probes' reach: one
// digest per probe slot, "<container>/<probe field>", as in
// ApprovedReachAnnotation. probed keeps the reach a pod had when it first
// saw it, and holds it there while the probe-reach admission policy is not
// in force (docs/security.md, "What holds when a part is missing").
type ReachRecord map[string]string

// PodReach returns the reach of every probe of pod's annotation that has
// any; an error, and nothing, when the annotation is malformed.
func PodReach(pod *v1.Pod) (ReachRecord, error) {
	reach, err := podReach(pod)
	if err != nil {
		return nil, err
	}
	out := make(ReachRecord, len(reach))
	for k, r := range reach {
		out[k] = r.digest
	}
	return out, nil
}

// ReachKey names a declared probe's slot in a ReachRecord.
func ReachKey(d DeclaredProbe) string { return reachKey(d.Container.Name, probeFieldName(d.Type)) }

// String is the record in ApprovedReachAnnotation's format: "v1", then
// the sorted ",<slot>=<digest>" entries.
func (r ReachRecord) String() string {
	reach := make(map[string]probeReach, len(r))
	for k, d := range r {
		reach[k] = probeReach{digest: d}
	}
	return formatApproval(reach)
}

// ParseReachRecord reads a record String wrote, as strictly as an
// approval.
func ParseReachRecord(s string) (ReachRecord, error) {
	m, err := parseApproval(s)
	if err != nil {
		return nil, err
	}
	return ReachRecord(m), nil
}

// HoldReach keeps the declared probes whose reach is the one record holds
// for their slot, and appends a problem (an InvalidProbe saying why, which
// names the policy's state) for each other probe of the annotation with
// any reach. Spec probes, and probes without reach, are always kept.
func HoldReach(pod *v1.Pod, declared []DeclaredProbe, problems []ProbeProblem, record ReachRecord, why string) ([]DeclaredProbe, []ProbeProblem) {
	reach, readErr := podReach(pod)
	kept := declared[:0:0]
	for _, d := range declared {
		k := ReachKey(d)
		r, has := reach[k]
		if !d.FromAnnotation || (readErr == nil && (!has || record[k] == r.digest)) {
			kept = append(kept, d)
			continue
		}
		t := d.Type
		problems = append(problems, ProbeProblem{
			Container: d.Container.Name,
			Type:      &t,
			Field:     strings.Join(r.fields, ", "),
			Detail: field.ErrorTypeForbidden.String() + ": " + fmt.Sprintf("changed after probed first saw the pod, while the probe-reach admission policy "+
				"is not in force (%s): without it probed cannot tell that a user allowed to create pods/exec on the pod made the change, so it runs only "+
				"what the pod's probes ran, or where they connected, then; recreate the pod to change it, or restore the policy", why),
			FromAnnotation: true,
		})
	}
	return kept, problems
}
