package manager

import (
	"sort"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// specTargetKind says what a container name denotes in a pod, for probing.
type specTargetKind int

const (
	specTargetUnknown   specTargetKind = iota // no container of that name
	specTargetRegular                         // spec.containers
	specTargetSidecar                         // spec.initContainers with restartPolicy Always
	specTargetPlainInit                       // spec.initContainers without restartPolicy Always
	specTargetEphemeral                       // spec.ephemeralContainers
)

// specKeyProblems is why an annotation key of each kind that is not a probe
// target is ignored, worded as the API words the same rule for the spec's
// probe fields.
var specKeyProblems = map[specTargetKind]string{
	specTargetUnknown:   field.ErrorTypeNotFound.String() + ": no container or restartable init container of this name in the pod",
	specTargetPlainInit: field.ErrorTypeForbidden.String() + ": may not be set for init containers without restartPolicy=Always",
	specTargetEphemeral: field.ErrorTypeForbidden.String() + ": cannot be set for an Ephemeral Container",
}

// specTarget is one container probed may probe.
type specTarget struct {
	container *v1.Container // points into the pod; never modified
	init      bool          // a sidecar
}

// specTargetsOf returns pod's probe targets in output order (sidecars in
// spec order, then regular containers in spec order) and the kind of every
// container name. If a name repeats (the API forbids it) the first wins.
func specTargetsOf(pod *v1.Pod) ([]specTarget, map[string]specTargetKind) {
	kinds := map[string]specTargetKind{}
	var targets []specTarget
	add := func(c *v1.Container, kind specTargetKind) {
		if _, dup := kinds[c.Name]; dup {
			return
		}
		kinds[c.Name] = kind
		if kind == specTargetRegular || kind == specTargetSidecar {
			targets = append(targets, specTarget{container: c, init: kind == specTargetSidecar})
		}
	}
	for i := range pod.Spec.InitContainers {
		c := &pod.Spec.InitContainers[i]
		if c.RestartPolicy != nil && *c.RestartPolicy == v1.ContainerRestartPolicyAlways {
			add(c, specTargetSidecar)
		}
	}
	for i := range pod.Spec.Containers {
		add(&pod.Spec.Containers[i], specTargetRegular)
	}
	for i := range pod.Spec.InitContainers {
		add(&pod.Spec.InitContainers[i], specTargetPlainInit) // sidecars already taken
	}
	for i := range pod.Spec.EphemeralContainers {
		c := v1.Container(pod.Spec.EphemeralContainers[i].EphemeralContainerCommon)
		add(&c, specTargetEphemeral)
	}
	return targets, kinds
}

// specCheckAnnotationKeys keeps the annotation entries that name probe
// targets and appends a problem for every other key, sorted by key.
func specCheckAnnotationKeys(entries map[string]specAnnotationEntry, kinds map[string]specTargetKind, problems []ProbeProblem) (map[string]specAnnotationEntry, []ProbeProblem) {
	keys := make([]string, 0, len(entries))
	for k := range entries {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	kept := make(map[string]specAnnotationEntry, len(entries))
	for _, k := range keys {
		kind := kinds[k]
		if detail, bad := specKeyProblems[kind]; bad {
			problems = append(problems, ProbeProblem{Container: k, Detail: detail, FromAnnotation: true})
			continue
		}
		kept[k] = entries[k]
	}
	return kept, problems
}
