package kill

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	v1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/clock"

	"github.com/probed-dev/probed/pkg/kubeclient"
)

// Ledger counts, across every node, the restarts in flight under each
// PodDisruptionBudget: one Lease per PDB in probed's own namespace
// (probed-pdb-<PDB UID>), its annotation DisruptionsAnnotation listing the
// pods restarted and until when they count. A restart is recorded by an
// update that carries the Lease's resourceVersion, so of two probed
// instances spending the last disruption, one gets a conflict, reads the
// other's record and is refused: the Eviction API's protocol on
// status.disruptedPods, on an object probed may write without the right
// to change any PDB. Each kill costs one GET and one UPDATE (a CREATE for
// a PDB's first), a release one of each.
//
// A record counts until its pod is Ready again (its node's probed releases
// it) or for HoldFor at the most: a node that went away cannot hold a
// disruption for longer.
type Ledger struct {
	Leases kubeclient.CoordinationV1Interface
	// Namespace is probed's own, where the Leases live.
	Namespace string
	// Node names this probed in the records.
	Node string
	// HoldFor bounds a record's life (DefaultHoldFor when 0).
	HoldFor time.Duration
	Clock   clock.PassiveClock
}

// DisruptionsAnnotation holds a Lease's records: JSON, pod UID to record.
const DisruptionsAnnotation = "probed.io/disruptions"

// DefaultHoldFor is the disruption controller's own window for a pod in a
// PDB's status.disruptedPods (DeletionTimeout, two minutes): long enough
// for the pod's restart to show as not Ready, after which the controller's
// own count holds the budget.
const DefaultHoldFor = 2 * time.Minute

// maxConflicts bounds one decision's retries; past it the kill is deferred
// as contended.
const maxConflicts = 5

// errContended: the Lease kept changing under us.
var errContended = errors.New("the PodDisruptionBudget's ledger kept changing; probed will ask again")

// disruption is one record: a pod restarted under the PDB.
type disruption struct {
	Pod   string      `json:"pod"`
	Node  string      `json:"node"`
	Since metav1.Time `json:"since"`
	Until metav1.Time `json:"until"`
}

// spend records a disruption of pod under pdb if j, judged on the other
// pods' records in flight, allows it. It returns j's verdict; err is for
// an API server that could not be asked (or errContended).
func (l *Ledger) spend(ctx context.Context, pdb *policyv1.PodDisruptionBudget, pod *v1.Pod,
	j func(inFlight int32) budgetJudgement) (budgetJudgement, error) {
	for range maxConflicts {
		lease, create, err := l.get(ctx, pdb)
		if err != nil {
			return budgetJudgement{}, err
		}
		records := l.live(lease)
		if _, ok := records[string(pod.UID)]; ok {
			// A kill of a pod already recorded: it goes under that record.
			return budgetJudgement{Allowed: true, Held: true}, nil
		}
		verdict := j(int32(len(records)))
		if !verdict.Allowed || !verdict.Spend {
			return verdict, nil
		}
		now := l.now()
		records[string(pod.UID)] = disruption{
			Pod: pod.Namespace + "/" + pod.Name, Node: l.Node,
			Since: metav1.NewTime(now), Until: metav1.NewTime(now.Add(l.holdFor())),
		}
		if err := l.write(ctx, lease, create, records); err != nil {
			if apierrors.IsConflict(err) || apierrors.IsAlreadyExists(err) {
				continue
			}
			return budgetJudgement{}, err
		}
		return verdict, nil
	}
	return budgetJudgement{}, errContended
}

// release removes pod's record under the PDB with uid, if there is one.
func (l *Ledger) release(ctx context.Context, pdbUID, podUID types.UID) error {
	for range maxConflicts {
		lease, err := l.Leases.Leases(l.Namespace).Get(ctx, leaseName(pdbUID), metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return nil
		}
		if err != nil {
			return err
		}
		records := l.live(lease)
		if _, ok := records[string(podUID)]; !ok {
			return nil
		}
		delete(records, string(podUID))
		if err := l.write(ctx, lease, false, records); err != nil {
			if apierrors.IsConflict(err) {
				continue
			}
			return err
		}
		return nil
	}
	return errContended
}

// get reads pdb's Lease, or makes a new one to create.
func (l *Ledger) get(ctx context.Context, pdb *policyv1.PodDisruptionBudget) (*coordinationv1.Lease, bool, error) {
	lease, err := l.Leases.Leases(l.Namespace).Get(ctx, leaseName(pdb.UID), metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{
			Name: leaseName(pdb.UID), Namespace: l.Namespace,
			Labels:      map[string]string{"app.kubernetes.io/managed-by": "probed"},
			Annotations: map[string]string{"probed.io/pdb": pdb.Namespace + "/" + pdb.Name},
		}}, true, nil
	}
	return lease, false, err
}

func (l *Ledger) write(ctx context.Context, lease *coordinationv1.Lease, create bool, records map[string]disruption) error {
	body, err := json.Marshal(records)
	if err != nil {
		return err
	}
	lease = lease.DeepCopy()
	if lease.Annotations == nil {
		lease.Annotations = map[string]string{}
	}
	lease.Annotations[DisruptionsAnnotation] = string(body)
	holder, now := l.Node, metav1.NewMicroTime(l.now())
	lease.Spec.HolderIdentity, lease.Spec.RenewTime = &holder, &now
	c := l.Leases.Leases(l.Namespace)
	if create {
		_, err = c.Create(ctx, lease, metav1.CreateOptions{})
	} else {
		// The resourceVersion read travels with the update: a conflict
		// means another probed wrote first.
		_, err = c.Update(ctx, lease, metav1.UpdateOptions{})
	}
	return err
}

// live is a Lease's records that still count. Records that cannot be read
// are dropped: the Lease is probed's, and a record no one can read holds
// nothing back.
func (l *Ledger) live(lease *coordinationv1.Lease) map[string]disruption {
	now := l.now()
	records := decode(lease)
	for uid, d := range records {
		if !now.Before(d.Until.Time) {
			delete(records, uid)
		}
	}
	return records
}

func decode(lease *coordinationv1.Lease) map[string]disruption {
	records := map[string]disruption{}
	if raw := lease.Annotations[DisruptionsAnnotation]; raw != "" {
		_ = json.Unmarshal([]byte(raw), &records)
	}
	return records
}

func leaseName(pdbUID types.UID) string { return fmt.Sprintf("probed-pdb-%s", pdbUID) }

func (l *Ledger) holdFor() time.Duration {
	if l.HoldFor <= 0 {
		return DefaultHoldFor
	}
	return l.HoldFor
}

func (l *Ledger) now() time.Time {
	if l.Clock == nil {
		return time.Now()
	}
	return l.Clock.Now()
}
