package probeview

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	v1 "k8s.io/api/core/v1"

	"github.com/probed-dev/probed/pkg/probespec"
	"github.com/probed-dev/probed/pkg/status"
)

// Runner says who runs one of a pod's probes, from what the pod declares.
type Runner string

const (
	// RunByProbed: the probed.io/probes annotation declares it, validly.
	RunByProbed Runner = "probed"
	// RunByKubelet: the pod spec declares it, and the annotation does not.
	RunByKubelet Runner = "kubelet"
	// RunByBoth: both declare it, so both run it, each with its own effect.
	RunByBoth Runner = "both"
	// RunByNobody: only the annotation declares it, and probed refuses it
	// (InvalidProbe).
	RunByNobody Runner = "invalid"
)

// ProbeRunner is one probe of a pod and who runs it.
type ProbeRunner struct {
	Container string `json:"container"`
	// ProbeType is Liveness, Readiness or Startup.
	ProbeType string `json:"probeType"`
	By        Runner `json:"by"`
}

// ProbedPod is a pod of probed's DaemonSet.
type ProbedPod struct {
	Namespace string `json:"namespace"`
	Name      string `json:"name"`
	Ready     bool   `json:"ready"`
	// DryRun: it runs with --dry-run, so it writes no condition.
	DryRun bool `json:"dryRun,omitempty"`
}

// answers reports whether p writes conditions: ready, not in dry-run.
func (p *ProbedPod) answers() bool { return p != nil && p.Ready && !p.DryRun }

// Condition is one of probed's pod conditions.
type Condition struct {
	Type   string `json:"type"`
	Status string `json:"status"`
	Reason string `json:"reason,omitempty"`
}

// PodView is who probes one pod: `kubectl probed status` for a namespace,
// a workload or a selector prints one row of it per pod.
type PodView struct {
	Namespace string `json:"namespace"`
	Name      string `json:"name"`
	// Node is the pod's node; "" before it is scheduled.
	Node   string        `json:"node,omitempty"`
	Probes []ProbeRunner `json:"probes"`
	// Gated: the pod has the probed.io/ready readiness gate.
	Gated bool `json:"gated"`
	// Probed is the probed pod on Node; nil when there is none.
	Probed *ProbedPod `json:"probed,omitempty"`
	// Conditions are probed's conditions on the pod.
	Conditions []Condition `json:"conditions,omitempty"`
	// Notes say what is wrong, most urgent first.
	Notes []string `json:"notes,omitempty"`
}

// Note texts.
const (
	NoteNoProbed       = "no probed on node"
	NoteProbedNotReady = "probed on node not ready"
	NoteProbedDryRun   = "probed on node runs --dry-run"
	// Appended to the three above for a gated pod: nothing writes its gate.
	noteUnanswered = ": gate unanswered"
)

// ViewPod is who probes pod, given the probed pods by node (ProbedByNode).
func ViewPod(pod *v1.Pod, probed map[string]*ProbedPod) PodView {
	v := PodView{Namespace: pod.Namespace, Name: pod.Name, Node: pod.Spec.NodeName, Probes: []ProbeRunner{}, Gated: hasGate(pod)}
	if v.Node != "" {
		v.Probed = probed[v.Node]
	}
	for _, c := range status.OwnedConditions(pod.Status.Conditions) {
		v.Conditions = append(v.Conditions, Condition{Type: string(c.Type), Status: string(c.Status), Reason: c.Reason})
	}
	declared, problems := probespec.DeclaredProbes(pod, probespec.ProbeSourceAnnotation)
	v.Probes = runners(pod, declared, problems)

	gating := slices.ContainsFunc(declared, func(d probespec.DeclaredProbe) bool {
		return d.Type == probespec.Readiness || d.Type == probespec.Startup
	})
	switch {
	case v.Node == "":
		v.Notes = append(v.Notes, "not scheduled")
	case v.Gated && !v.Probed.answers():
		v.Notes = append(v.Notes, probedNote(v.Probed)+noteUnanswered)
	case len(declared) > 0 && v.Probed == nil:
		v.Notes = append(v.Notes, NoteNoProbed+": probed.io/probes not run")
	}
	if v.Gated && len(declared) == 0 {
		v.Notes = append(v.Notes, "gated, but no probe for probed: never Ready")
	}
	if !v.Gated && gating {
		v.Notes = append(v.Notes, "no probed.io/ready gate: probed's readiness does not count")
	}
	if n := len(problems); n > 0 {
		v.Notes = append(v.Notes, fmt.Sprintf("%s: %d problem(s), see the pod's InvalidProbe events", probespec.ProbesAnnotation, n))
	}
	for _, p := range v.Probes {
		if p.By == RunByBoth {
			v.Notes = append(v.Notes, "probed and the kubelet both run "+strings.ToLower(p.ProbeType)+" of "+p.Container)
		}
	}
	return v
}

func probedNote(p *ProbedPod) string {
	switch {
	case p == nil:
		return NoteNoProbed
	case !p.Ready:
		return NoteProbedNotReady
	}
	return NoteProbedDryRun
}

// Unanswered reports whether v waits on probed's gate with nothing on its
// node to answer it.
func (v PodView) Unanswered() bool {
	return v.Gated && v.Node != "" && !v.Probed.answers()
}

// runners lists the pod's probes, sidecars first and then containers (the
// order the kubelet starts them), each in the order startup, liveness,
// readiness, with who runs it.
func runners(pod *v1.Pod, declared []probespec.DeclaredProbe, problems []probespec.ProbeProblem) []ProbeRunner {
	type key struct {
		container string
		typ       probespec.ProbeType
	}
	annotated := map[key]Runner{}
	for _, d := range declared {
		annotated[key{d.Container.Name, d.Type}] = RunByProbed
	}
	for _, p := range problems {
		if p.Type != nil && p.FromAnnotation {
			annotated[key{p.Container, *p.Type}] = RunByNobody
		}
	}
	var containers []*v1.Container
	for i := range pod.Spec.InitContainers {
		if c := &pod.Spec.InitContainers[i]; c.RestartPolicy != nil && *c.RestartPolicy == v1.ContainerRestartPolicyAlways {
			containers = append(containers, c)
		}
	}
	for i := range pod.Spec.Containers {
		containers = append(containers, &pod.Spec.Containers[i])
	}
	out := []ProbeRunner{}
	for _, c := range containers {
		for _, t := range []struct {
			typ  probespec.ProbeType
			spec *v1.Probe
		}{{probespec.Startup, c.StartupProbe}, {probespec.Liveness, c.LivenessProbe}, {probespec.Readiness, c.ReadinessProbe}} {
			by, inAnnotation := annotated[key{c.Name, t.typ}]
			switch {
			case inAnnotation && t.spec != nil && by == RunByProbed:
				by = RunByBoth
			case inAnnotation && t.spec != nil:
				by = RunByKubelet // the annotation's is refused; the kubelet runs the spec's
			case !inAnnotation && t.spec != nil:
				by = RunByKubelet
			case !inAnnotation:
				continue
			}
			out = append(out, ProbeRunner{Container: c.Name, ProbeType: t.typ.String(), By: by})
		}
	}
	return out
}

func hasGate(pod *v1.Pod) bool {
	return slices.ContainsFunc(pod.Spec.ReadinessGates, func(g v1.PodReadinessGate) bool {
		return g.ConditionType == status.PodReadyCondition
	})
}

// ProbedByNode picks, for each node, the probed pod that serves it from
// probed's pods: one that answers (ready, not in dry-run) over one that is
// ready, over one that runs, the newest first. Finished pods and pods being
// deleted serve nothing.
func ProbedByNode(pods []v1.Pod) map[string]*ProbedPod {
	rank := func(p *v1.Pod, v *ProbedPod) int {
		switch {
		case v.answers():
			return 3
		case v.Ready:
			return 2
		case p.Status.Phase == v1.PodRunning:
			return 1
		}
		return 0
	}
	type pick struct {
		pod  *v1.Pod
		view *ProbedPod
	}
	best := map[string]pick{}
	for i := range pods {
		p := &pods[i]
		if p.Spec.NodeName == "" || p.DeletionTimestamp != nil || p.Status.Phase == v1.PodSucceeded || p.Status.Phase == v1.PodFailed {
			continue
		}
		v := &ProbedPod{Namespace: p.Namespace, Name: p.Name, Ready: podReady(p), DryRun: dryRun(p)}
		cur, ok := best[p.Spec.NodeName]
		if !ok || rank(p, v) > rank(cur.pod, cur.view) ||
			(rank(p, v) == rank(cur.pod, cur.view) && p.CreationTimestamp.After(cur.pod.CreationTimestamp.Time)) {
			best[p.Spec.NodeName] = pick{p, v}
		}
	}
	out := make(map[string]*ProbedPod, len(best))
	for node, b := range best {
		out[node] = b.view
	}
	return out
}

func podReady(p *v1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == v1.PodReady {
			return c.Status == v1.ConditionTrue
		}
	}
	return false
}

// dryRun reports whether probed's container runs with --dry-run (the last
// one given wins, as when probed parses it).
func dryRun(p *v1.Pod) bool {
	on := false
	for _, c := range p.Spec.Containers {
		for _, a := range c.Args {
			name, value, hasValue := strings.Cut(a, "=")
			if name != "--dry-run" {
				continue
			}
			on = true
			if hasValue {
				on, _ = strconv.ParseBool(value)
			}
		}
	}
	return on
}
