package kill

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	"github.com/probed-dev/probed/pkg/containerstatus"
)

// DisruptionBudgets is the Guard's PodDisruptionBudget gate
// (--pdb-restarts): it promises that a liveness or startup kill of a pod
// that PDBs select goes ahead only when every one of them allows it,
// counted across all nodes through the Ledger; that a kill it refuses is
// asked again at the next failure threshold; that a disruption it spent
// is given back once the pod is Ready again; and that when the API server
// cannot be asked, the decision falls to the node-local guards.
type DisruptionBudgets struct {
	// PDBs lists the PodDisruptionBudgets of a namespace (an informer's).
	PDBs func(namespace string) []*policyv1.PodDisruptionBudget
	// Synced reports whether PDBs has listed them all yet; nil: always.
	Synced func() bool
	// Ledger records the disruptions in flight; required.
	Ledger *Ledger
	// Pod returns this node's pod with uid, nil once it is gone: how a
	// spent disruption is seen to end.
	Pod func(uid types.UID) *v1.Pod
	// MaxDeferral: a kill refused this long after its first refusal goes
	// ahead, with an event saying so. 0: refused for as long as the PDBs
	// refuse, as an eviction is.
	MaxDeferral time.Duration
	Clock       clock.PassiveClock

	mu sync.Mutex
	// spent: pods restarted under PDBs, until they are Ready again.
	spent map[types.UID]spentRestart
	// refusedSince: the first refusal of each pod's kill still refused.
	refusedSince map[types.UID]time.Time
}

type spentRestart struct {
	pdbs      []types.UID
	container string
	restarts  int32
}

// admission is the gate's answer for one kill.
type admission struct {
	Allowed bool
	// Why a kill is refused, or why one refused too long goes ahead.
	Why string
	// Err: the API server could not be asked; the kill is left to the
	// node-local guards.
	Err error
}

// admit decides a kill of pod's container.
func (b *DisruptionBudgets) admit(ctx context.Context, pod *v1.Pod, container string) admission {
	if b.Synced != nil && !b.Synced() {
		return admission{Err: errors.New("the PodDisruptionBudgets have not been listed yet")}
	}
	pdbs := b.selecting(pod)
	if len(pdbs) == 0 {
		return admission{Allowed: true}
	}
	// spentUnder: the disruptions this kill spent, given back if another
	// PDB refuses; heldUnder: records of an earlier kill of the pod, which
	// this kill goes under and which a refusal leaves as they were.
	var spentUnder, heldUnder []types.UID
	for _, pdb := range pdbs {
		verdict, err := b.Ledger.spend(ctx, pdb, pod, func(inFlight int32) budgetJudgement {
			return judge(pdb, pod, inFlight)
		})
		if err == nil && verdict.Allowed {
			switch {
			case verdict.Spend:
				spentUnder = append(spentUnder, pdb.UID)
			case verdict.Held:
				heldUnder = append(heldUnder, pdb.UID)
			}
			continue
		}
		// All or nothing, as an eviction under several PDBs.
		b.giveBack(ctx, pod.UID, spentUnder)
		if errors.Is(err, errContended) {
			return b.refused(pod, err.Error())
		}
		if err != nil {
			return admission{Err: fmt.Errorf("PodDisruptionBudget %s/%s: %w", pdb.Namespace, pdb.Name, err)}
		}
		return b.refused(pod, verdict.Why)
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	delete(b.refusedSince, pod.UID)
	if under := slices.Concat(spentUnder, heldUnder); len(under) > 0 {
		if b.spent == nil {
			b.spent = map[types.UID]spentRestart{}
		}
		// The restart count of this kill: a record held from an earlier
		// one lasts until the pod is Ready after this one, not the first
		// (which the pod may still show while this one stops it).
		for _, uid := range b.spent[pod.UID].pdbs {
			if !slices.Contains(under, uid) {
				under = append(under, uid)
			}
		}
		b.spent[pod.UID] = spentRestart{pdbs: under, container: container, restarts: restartCount(pod, container)}
	}
	return admission{Allowed: true}
}

// refused returns a refusal, or lets the kill go once MaxDeferral has
// passed since the first.
func (b *DisruptionBudgets) refused(pod *v1.Pod, why string) admission {
	now := b.now()
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.refusedSince == nil {
		b.refusedSince = map[types.UID]time.Time{}
	}
	first, ok := b.refusedSince[pod.UID]
	if !ok {
		b.refusedSince[pod.UID] = now
		first = now
	}
	if b.MaxDeferral > 0 && now.Sub(first) >= b.MaxDeferral {
		delete(b.refusedSince, pod.UID)
		return admission{Allowed: true, Why: fmt.Sprintf("%s; the restart goes ahead after %s of deferral (--pdb-restart-max-deferral)", why, b.MaxDeferral)}
	}
	return admission{Why: why}
}

// selecting is the PDBs that select pod, in UID order (two kills of one
// workload take them in the same order).
func (b *DisruptionBudgets) selecting(pod *v1.Pod) []*policyv1.PodDisruptionBudget {
	var out []*policyv1.PodDisruptionBudget
	for _, pdb := range b.PDBs(pod.Namespace) {
		if selects(pdb, pod) {
			out = append(out, pdb)
		}
	}
	slices.SortFunc(out, func(a, c *policyv1.PodDisruptionBudget) int { return strings.Compare(string(a.UID), string(c.UID)) })
	return out
}

// Run gives back, every period until ctx ends, the disruptions of pods
// that are Ready again after their restart, or gone, and forgets the
// refusals of pods that are gone.
func (b *DisruptionBudgets) Run(ctx context.Context, period time.Duration) {
	wait.UntilWithContext(ctx, b.releaseRecovered, period)
}

func (b *DisruptionBudgets) releaseRecovered(ctx context.Context) {
	b.mu.Lock()
	for uid := range b.refusedSince {
		if b.Pod(uid) == nil {
			delete(b.refusedSince, uid)
		}
	}
	var done []types.UID
	for uid, s := range b.spent {
		if p := b.Pod(uid); p == nil || (podReady(p) && restartCount(p, s.container) > s.restarts) {
			done = append(done, uid)
		}
	}
	b.mu.Unlock()
	for _, uid := range done {
		b.mu.Lock()
		s := b.spent[uid]
		b.mu.Unlock()
		if b.giveBack(ctx, uid, s.pdbs) == nil {
			b.mu.Lock()
			delete(b.spent, uid)
			b.mu.Unlock()
		}
	}
}

// giveBack removes pod's records under pdbs; a record it cannot remove
// ends with the Ledger's HoldFor.
func (b *DisruptionBudgets) giveBack(ctx context.Context, pod types.UID, pdbs []types.UID) error {
	var errs []error
	for _, uid := range pdbs {
		if err := b.Ledger.release(ctx, uid, pod); err != nil {
			klog.V(2).InfoS("Could not give a disruption back; it ends on its own", "podUID", pod, "pdbUID", uid, "err", err)
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

func restartCount(pod *v1.Pod, container string) int32 {
	if s := containerstatus.Find(pod, container); s != nil {
		return s.RestartCount
	}
	return 0
}

func (b *DisruptionBudgets) now() time.Time {
	if b.Clock == nil {
		return time.Now()
	}
	return b.Clock.Now()
}
