package admission

import (
	"maps"
	"slices"
	"strconv"
	"strings"

	jsonpatch "gomodules.xyz/jsonpatch/v2"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
)

// podPatch returns the JSON patch that turns before into after, touching
// only what adoption changes: annotations, the probes of containers and init
// containers, and readiness gates. Everything else in the request's object
// is left as sent, including fields this build's Go types do not know (a
// newer API server's): a patch computed from a re-encoded pod would delete
// them.
//
// before and after must have the same containers and init containers, in
// the same order; the caller changes nothing else.
func podPatch(before, after *v1.Pod) []jsonpatch.Operation {
	var ops []jsonpatch.Operation
	ops = appendAnnotationOps(ops, before.Annotations, after.Annotations)
	ops = appendProbeOps(ops, "/spec/initContainers", before.Spec.InitContainers, after.Spec.InitContainers)
	ops = appendProbeOps(ops, "/spec/containers", before.Spec.Containers, after.Spec.Containers)
	return appendGateOps(ops, before.Spec.ReadinessGates, after.Spec.ReadinessGates)
}

func appendAnnotationOps(ops []jsonpatch.Operation, before, after map[string]string) []jsonpatch.Operation {
	if maps.Equal(before, after) {
		return ops
	}
	if len(before) == 0 {
		// Absent, null or {}: "add" sets the whole map whichever it is.
		return append(ops, jsonpatch.NewOperation("add", "/metadata/annotations", after))
	}
	for _, k := range slices.Sorted(maps.Keys(after)) {
		if old, ok := before[k]; !ok || old != after[k] {
			ops = append(ops, jsonpatch.NewOperation("add", "/metadata/annotations/"+escape(k), after[k]))
		}
	}
	for _, k := range slices.Sorted(maps.Keys(before)) {
		if _, ok := after[k]; !ok {
			ops = append(ops, jsonpatch.NewOperation("remove", "/metadata/annotations/"+escape(k), nil))
		}
	}
	return ops
}

func appendProbeOps(ops []jsonpatch.Operation, path string, before, after []v1.Container) []jsonpatch.Operation {
	for i := range min(len(before), len(after)) {
		b, a := &before[i], &after[i]
		for _, f := range []struct {
			name string
			b, a *v1.Probe
		}{
			{"livenessProbe", b.LivenessProbe, a.LivenessProbe},
			{"readinessProbe", b.ReadinessProbe, a.ReadinessProbe},
			{"startupProbe", b.StartupProbe, a.StartupProbe},
		} {
			p := path + "/" + strconv.Itoa(i) + "/" + f.name
			switch {
			case f.b != nil && f.a == nil:
				ops = append(ops, jsonpatch.NewOperation("remove", p, nil))
			case f.a != nil && !equality.Semantic.DeepEqual(f.b, f.a):
				ops = append(ops, jsonpatch.NewOperation("add", p, f.a))
			}
		}
	}
	return ops
}

func appendGateOps(ops []jsonpatch.Operation, before, after []v1.PodReadinessGate) []jsonpatch.Operation {
	switch {
	case slices.Equal(before, after):
		return ops
	case len(before) == 0 || len(after) < len(before) || !slices.Equal(before, after[:len(before)]):
		return append(ops, jsonpatch.NewOperation("add", "/spec/readinessGates", after))
	}
	for _, g := range after[len(before):] {
		ops = append(ops, jsonpatch.NewOperation("add", "/spec/readinessGates/-", g))
	}
	return ops
}

// escape makes s one JSON Pointer reference token (RFC 6901).
func escape(s string) string {
	return strings.ReplaceAll(strings.ReplaceAll(s, "~", "~0"), "/", "~1")
}
