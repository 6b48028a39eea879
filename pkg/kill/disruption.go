package kill

import (
	"fmt"

	v1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
)

// A liveness or startup kill of a pod that PodDisruptionBudgets select is,
// with --pdb-restarts, a disruption each of them must allow, judged as the
// API server judges an eviction (pkg/registry/core/pod/storage/eviction.go)
// with the disruptions other probed instances hold in flight (Ledger)
// counted as spent.

// budgetJudgement is one PDB's answer for one kill.
type budgetJudgement struct {
	// Allowed: the kill may go ahead under this PDB.
	Allowed bool
	// Spend: it spends one of the PDB's disruptions, held in the Ledger
	// until the pod is Ready again (a pod already unhealthy spends none, as
	// in an eviction).
	Spend bool
	// Held: the pod already has a record under the PDB, an earlier kill's
	// not yet given back (the worker's retry of a kill that failed, or a
	// new container killed before its restart was seen Ready, or a record
	// from before probed restarted); this kill goes under it, and the
	// record is then held until the pod is Ready after this kill.
	Held bool
	// Why says why not, for the event: the PDB, its numbers, the rule.
	Why string
}

// judge decides pdb for a kill of pod while inFlight disruptions of other
// pods are held under it.
//
// As an eviction: a PDB whose status the disruption controller has not
// caught up with allows nothing. A healthy (Ready) pod needs a disruption
// to spare: status.disruptionsAllowed minus those in flight. A pod already
// unhealthy goes under unhealthyPodEvictionPolicy AlwaysAllow; under
// IfHealthyBudget (the default) it goes while the workload has its desired
// healthy pods without it, else it needs a disruption to spare like a
// healthy one.
//
// In-flight disruptions count as spent whether or not the controller has
// seen them yet: never more than the budget, and with a budget of more
// than one, for a short while after each kill, possibly fewer.
func judge(pdb *policyv1.PodDisruptionBudget, pod *v1.Pod, inFlight int32) budgetJudgement {
	s := pdb.Status
	name := pdb.Namespace + "/" + pdb.Name
	if s.ObservedGeneration < pdb.Generation {
		return budgetJudgement{Why: fmt.Sprintf("PodDisruptionBudget %s has changed and the disruption controller has not recounted it yet", name)}
	}
	if !podReady(pod) && !kubeletInitializing(pod) {
		if p := pdb.Spec.UnhealthyPodEvictionPolicy; p != nil && *p == policyv1.AlwaysAllow {
			return budgetJudgement{Allowed: true}
		}
		if s.DesiredHealthy > 0 && s.CurrentHealthy-inFlight >= s.DesiredHealthy {
			return budgetJudgement{Allowed: true}
		}
	}
	if spare := s.DisruptionsAllowed - inFlight; spare > 0 {
		return budgetJudgement{Allowed: true, Spend: true}
	}
	return budgetJudgement{Why: fmt.Sprintf("PodDisruptionBudget %s allows no disruption now (%d of %d desired pods healthy, %d restarts in flight across nodes)",
		name, s.CurrentHealthy, s.DesiredHealthy, inFlight)}
}

// podReady is the disruption controller's healthy: Ready, and not being
// deleted.
func podReady(pod *v1.Pod) bool {
	if pod.DeletionTimestamp != nil {
		return false
	}
	for _, c := range pod.Status.Conditions {
		if c.Type == v1.PodReady {
			return c.Status == v1.ConditionTrue
		}
	}
	return false
}

// kubeletInitializingMessage is the Ready condition the kubelet's Pods API
// reports for a pod right after a kubelet restart, before the kubelet has
// synced it again (pkg/kubelet/apis/pods, getEffectivePodStatus): False
// from the kubelet's not knowing yet, not from the pod.
const kubeletInitializingMessage = "Kubelet is initializing pod containers"

// kubeletInitializing reports that pod's Ready is that placeholder. Such a
// pod is judged as healthy: its restart needs a disruption to spare, as
// the API server's copy (still Ready) would have it judged.
func kubeletInitializing(pod *v1.Pod) bool {
	for _, c := range pod.Status.Conditions {
		if c.Type == v1.PodReady {
			return c.Status == v1.ConditionFalse && c.Reason == "ContainersNotReady" && c.Message == kubeletInitializingMessage
		}
	}
	return false
}

// selects reports whether pdb selects pod, as policy/v1 does: same
// namespace; a nil selector selects nothing, an empty one every pod.
func selects(pdb *policyv1.PodDisruptionBudget, pod *v1.Pod) bool {
	if pdb.Namespace != pod.Namespace || pdb.Spec.Selector == nil {
		return false
	}
	sel, err := metav1.LabelSelectorAsSelector(pdb.Spec.Selector)
	if err != nil {
		return false
	}
	return sel.Matches(labels.Set(pod.Labels))
}
