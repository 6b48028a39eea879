package probespec

import (
	"encoding/json"
	"fmt"
	"slices"
	"sort"
	"strings"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Adoption: handing a workload's spec probes to probed (the admission
// webhook and `probed convert` share this code).
const (
	// InjectLabel, set to InjectEnabled on a namespace or a pod, asks the
	// adoption webhook to hand the pods' probes to probed.
	InjectLabel   = "probed.io/inject"
	InjectEnabled = "enabled"
	// InjectAnnotation set to "false" on a pod opts it out.
	InjectAnnotation = "probed.io/inject"
	// AdoptedAnnotation records what adoption moved, as sorted
	// "<container>/<probe field>" entries separated by commas, e.g.
	// "app/livenessProbe,app/readinessProbe".
	AdoptedAnnotation = "probed.io/adopted"
	// ReadinessGate is the condition probed's readiness gate names.
	ReadinessGate v1.PodConditionType = "probed.io/ready"
)

// Adoption is what Adopt did to one pod template.
type Adoption struct {
	// Moved lists the spec probes taken into the annotation, as
	// "<container>/<probe field>", sorted.
	Moved []string
	// Kept lists spec probes that were removed from the spec but not
	// copied, because the annotation already declared that container's
	// probe of that type (the user's entry wins).
	Kept []string
	// Left lists spec probes left in the spec for the kubelet, with why
	// (adoptrules.go), in the order of Moved.
	Left []Left
	// GateAdded: the probed.io/ready readiness gate was added.
	GateAdded bool
}

// Changed reports whether Adopt changed anything.
func (a Adoption) Changed() bool { return len(a.Moved) > 0 || len(a.Kept) > 0 || a.GateAdded }

// OwnNameLabel is the label probed's own pods carry: deploy/'s DaemonSet
// and webhook, the chart's too.
const OwnNameLabel = "app.kubernetes.io/name"

// OwnNames returns the OwnNameLabel values of probed's own pods. Their
// probes stay with the kubelet: probed does not probe itself, and its
// webhook must not wait for probed to become Ready.
func OwnNames() []string { return []string{"probed", "probed-webhook"} }

// IsOwn reports whether a pod (template) is one of probed's own.
func IsOwn(meta *metav1.ObjectMeta) bool {
	return slices.Contains(OwnNames(), meta.Labels[OwnNameLabel])
}

// OptedOut reports whether a pod (template) opts out of adoption.
func OptedOut(meta *metav1.ObjectMeta) bool {
	return strings.EqualFold(meta.Annotations[InjectAnnotation], "false")
}

// Adopt is AdoptWith with the default options: the default host policy,
// and no raw spec to compare with.
func Adopt(meta *metav1.ObjectMeta, spec *v1.PodSpec) (Adoption, error) {
	return AdoptWith(meta, spec, AdoptOptions{})
}

// AdoptWith moves the livenessProbe, readinessProbe and startupProbe of every
// regular container and restartable init container (sidecar) out of spec
// and into meta's probed.io/probes annotation, and adds the probed.io/ready
// readiness gate when any container then has a readiness or startup probe
// declared for probed. An entry the annotation already has for the same
// container and probe type wins: the spec's probe is dropped. What was moved
// is recorded in probed.io/adopted.
//
// A probe that probed would not run as the kubelet does stays in the spec,
// untouched, and is listed in Left with the reason (adoptrules.go).
//
// It is idempotent: a second call finds nothing to move and a gate in place,
// and changes nothing. A malformed annotation is an error, and nothing is
// changed: adoption never loses what the user wrote. The annotation is
// rewritten (as compact JSON with sorted keys, keeping every existing entry
// and field as written) only when a probe moves into it.
func AdoptWith(meta *metav1.ObjectMeta, spec *v1.PodSpec, opts AdoptOptions) (Adoption, error) {
	var a Adoption
	raw, hasAnnotation := meta.Annotations[ProbesAnnotation]
	entries := map[string]map[string]json.RawMessage{}
	if hasAnnotation && strings.TrimSpace(raw) != "" {
		data, _, p := decodeAnnotationJSON(raw)
		if p != nil {
			return a, fmt.Errorf("%s", p.String())
		}
		if err := json.Unmarshal(data, &entries); err != nil {
			return a, fmt.Errorf("annotation %q: %w", ProbesAnnotation, err)
		}
		if entries == nil { // "null"
			entries = map[string]map[string]json.RawMessage{}
		}
	}

	var slots []adoptSlot
	add := func(c *v1.Container, sidecar bool) {
		for _, s := range []struct {
			typ   ProbeType
			field string
			probe **v1.Probe
		}{{Liveness, "livenessProbe", &c.LivenessProbe}, {Readiness, "readinessProbe", &c.ReadinessProbe}, {Startup, "startupProbe", &c.StartupProbe}} {
			if *s.probe != nil {
				slots = append(slots, adoptSlot{container: c, sidecar: sidecar, typ: s.typ, field: s.field, probe: s.probe})
			}
		}
	}
	for i := range spec.InitContainers {
		c := &spec.InitContainers[i]
		if c.RestartPolicy != nil && *c.RestartPolicy == v1.ContainerRestartPolicyAlways {
			add(c, true)
		}
	}
	for i := range spec.Containers {
		add(&spec.Containers[i], false)
	}

	judge := newAdoptJudge(spec, opts, entries)
	taken := slots[:0:0]
	for _, s := range slots {
		name := s.name()
		if _, declared := entries[s.container.Name][s.field]; declared {
			a.Kept = append(a.Kept, name)
			taken = append(taken, s)
			continue
		}
		if why := judge.leave(s); why != "" {
			a.Left = append(a.Left, Left{Probe: name, Reason: why})
			continue
		}
		b, err := json.Marshal(*s.probe)
		if err != nil {
			return Adoption{}, fmt.Errorf("%s: %w", name, err)
		}
		if entries[s.container.Name] == nil {
			entries[s.container.Name] = map[string]json.RawMessage{}
		}
		entries[s.container.Name][s.field] = b
		judge.moved(s.container.Name)
		a.Moved = append(a.Moved, name)
		taken = append(taken, s)
	}
	if len(a.Moved) > 0 {
		// encoding/json sorts map keys: the same probes give the same bytes.
		b, err := json.Marshal(entries)
		if err != nil {
			return Adoption{}, err
		}
		setAnnotation(meta, ProbesAnnotation, string(b))
	}
	for _, s := range taken {
		*s.probe = nil
	}
	if len(a.Moved)+len(a.Kept) > 0 {
		done := append(append([]string(nil), a.Moved...), a.Kept...)
		if prev := meta.Annotations[AdoptedAnnotation]; prev != "" {
			done = append(done, strings.Split(prev, ",")...)
		}
		setAnnotation(meta, AdoptedAnnotation, strings.Join(uniqueSorted(done), ","))
	}
	sort.Strings(a.Moved)
	sort.Strings(a.Kept)

	if gating(entries) && !hasGate(spec) {
		spec.ReadinessGates = append(spec.ReadinessGates, v1.PodReadinessGate{ConditionType: ReadinessGate})
		a.GateAdded = true
	}
	return a, nil
}

// entriesSize is the length of json.Marshal of an annotation's entries,
// kept per container so that adding a probe re-encodes only its own
// container's: "{" + `"<container>":<entry>` joined by "," + "}".
type entriesSize struct {
	of  map[string]int // len(`"<container>":<entry>`)
	sum int
}

func newEntriesSize(entries map[string]map[string]json.RawMessage) *entriesSize {
	z := &entriesSize{of: map[string]int{}}
	for c, e := range entries {
		z.set(c, e)
	}
	return z
}

// with is the length were container c's entry e.
func (z *entriesSize) with(c string, e map[string]json.RawMessage) int {
	n, sum := len(z.of), z.sum
	if old, ok := z.of[c]; ok {
		sum -= old
	} else {
		n++
	}
	return 2 + sum + pairSize(c, e) + n - 1 // n > 0: c is one
}

// set records container c's entry e.
func (z *entriesSize) set(c string, e map[string]json.RawMessage) {
	size := pairSize(c, e)
	z.sum += size - z.of[c]
	z.of[c] = size
}

// pairSize is the length of `"<c>":<e>` as json.Marshal writes it in a
// map; one that cannot be encoded counts as over every limit.
func pairSize(c string, e map[string]json.RawMessage) int {
	k, errK := json.Marshal(c)
	v, errV := json.Marshal(e)
	if errK != nil || errV != nil {
		return MaxAnnotationBytes + 1
	}
	return len(k) + 1 + len(v)
}

// gating reports whether any entry declares a readiness or startup probe.
func gating(entries map[string]map[string]json.RawMessage) bool {
	for _, e := range entries {
		for field, v := range e {
			if (field == "readinessProbe" || field == "startupProbe") && string(v) != "null" {
				return true
			}
		}
	}
	return false
}

func hasGate(spec *v1.PodSpec) bool {
	for _, g := range spec.ReadinessGates {
		if g.ConditionType == ReadinessGate {
			return true
		}
	}
	return false
}

func setAnnotation(meta *metav1.ObjectMeta, k, v string) {
	if meta.Annotations == nil {
		meta.Annotations = map[string]string{}
	}
	meta.Annotations[k] = v
}

func uniqueSorted(in []string) []string {
	in = slices.DeleteFunc(in, func(s string) bool { return s == "" })
	slices.Sort(in)
	return slices.Compact(in)
}
