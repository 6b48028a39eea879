package probespec

import (
	"sort"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// targetKind says what a container name denotes in a pod, for probing.
type targetKind int

const (
	targetUnknown   targetKind = iota // no container of that name
	targetRegular                     // spec.containers
	targetSidecar                     // spec.initContainers with restartPolicy Always
	targetPlainInit                   // spec.initContainers without restartPolicy Always
	targetEphemeral                   // spec.ephemeralContainers
)

// keyProblems is why an annotation key of each kind that is not a probe
// target is ignored, worded as the API words the same rule for the spec's
// probe fields.
var keyProblems = map[targetKind]string{
	targetUnknown:   field.ErrorTypeNotFound.String() + ": no container or restartable init container of this name in the pod",
	targetPlainInit: field.ErrorTypeForbidden.String() + ": may not be set for init containers without restartPolicy=Always",
	targetEphemeral: field.ErrorTypeForbidden.String() + ": cannot be set for an Ephemeral Container",
}

// targetContainer is one container probed may probe.
type targetContainer struct {
	container *v1.Container // points into the pod; never modified
	init      bool          // a sidecar
}

// targetsOf returns pod's probe targets in output order (sidecars in
// spec order, then regular containers in spec order) and the kind of every
// container name. If a name repeats (the API forbids it) the first wins.
func targetsOf(pod *v1.Pod) ([]targetContainer, map[string]targetKind) {
	kinds := map[string]targetKind{}
	var targets []targetContainer
	add := func(c *v1.Container, kind targetKind) {
		if _, dup := kinds[c.Name]; dup {
			return
		}
		kinds[c.Name] = kind
		if kind == targetRegular || kind == targetSidecar {
			targets = append(targets, targetContainer{container: c, init: kind == targetSidecar})
		}
	}
	for i := range pod.Spec.InitContainers {
		c := &pod.Spec.InitContainers[i]
		if c.RestartPolicy != nil && *c.RestartPolicy == v1.ContainerRestartPolicyAlways {
			add(c, targetSidecar)
		}
	}
	for i := range pod.Spec.Containers {
		add(&pod.Spec.Containers[i], targetRegular)
	}
	for i := range pod.Spec.InitContainers {
		add(&pod.Spec.InitContainers[i], targetPlainInit) // sidecars already taken
	}
	for i := range pod.Spec.EphemeralContainers {
		c := v1.Container(pod.Spec.EphemeralContainers[i].EphemeralContainerCommon)
		add(&c, targetEphemeral)
	}
	return targets, kinds
}

// checkAnnotationKeys keeps the annotation entries that name probe
// targets and appends a problem for every other key, sorted by key.
func checkAnnotationKeys(entries map[string]annotationEntry, kinds map[string]targetKind, problems []ProbeProblem) (map[string]annotationEntry, []ProbeProblem) {
	keys := make([]string, 0, len(entries))
	for k := range entries {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	kept := make(map[string]annotationEntry, len(entries))
	for _, k := range keys {
		kind := kinds[k]
		if detail, bad := keyProblems[kind]; bad {
			problems = append(problems, ProbeProblem{Container: k, Detail: detail, FromAnnotation: true})
			continue
		}
		kept[k] = entries[k]
	}
	return kept, problems
}
