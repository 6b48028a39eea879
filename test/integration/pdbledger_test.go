//go:build integration

package integration

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"

	v1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/probed-dev/probed/pkg/kill"
	"github.com/probed-dev/probed/pkg/kubeclient"
	"github.com/probed-dev/probed/pkg/probespec"
)

// countingKiller counts the kills the gate let through.
type countingKiller struct{ n atomic.Int32 }

func (c *countingKiller) Kill(context.Context, *v1.Pod, *v1.Container, string, probespec.ProbeType, *v1.Probe) error {
	c.n.Add(1)
	return nil
}

// Probed instances on many nodes race for a PodDisruptionBudget's last
// disruptions through the real API server's optimistic concurrency on the
// Ledger's Lease: in every round exactly the budget's number of kills go
// through, never more (a double spend), never fewer.
func TestPDBLedgerNoDoubleSpend(t *testing.T) {
	const nodes, rounds = 8, 25
	ctx := context.Background()
	if err := cp.EnsureNamespace(ctx, "probed-pdb"); err != nil {
		t.Fatal(err)
	}
	cfg := cp.RESTConfig()
	cfg.QPS, cfg.Burst = 500, 1000
	kc, err := kubeclient.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	for _, budget := range []int32{1, 2} {
		doubles, short := 0, 0
		for round := range rounds {
			pdb := &policyv1.PodDisruptionBudget{
				ObjectMeta: metav1.ObjectMeta{Namespace: "web", Name: "web", UID: types.UID(fmt.Sprintf("race-%d-%d", budget, round))},
				Spec:       policyv1.PodDisruptionBudgetSpec{Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}}},
				Status:     policyv1.PodDisruptionBudgetStatus{DisruptionsAllowed: budget, CurrentHealthy: 10, DesiredHealthy: 10 - budget, ExpectedPods: 10},
			}
			killed := &countingKiller{}
			start := make(chan struct{})
			var wg sync.WaitGroup
			for n := range nodes {
				guard := &kill.Guard{Inner: killed, Disruptions: &kill.DisruptionBudgets{
					PDBs:   func(string) []*policyv1.PodDisruptionBudget { return []*policyv1.PodDisruptionBudget{pdb} },
					Ledger: &kill.Ledger{Leases: kc.CoordinationV1(), Namespace: "probed-pdb", Node: fmt.Sprintf("node-%d", n)},
					Pod:    func(types.UID) *v1.Pod { return nil },
				}}
				pod := &v1.Pod{
					ObjectMeta: metav1.ObjectMeta{Namespace: "web", Name: fmt.Sprintf("web-%d", n), UID: types.UID(fmt.Sprintf("web-%d-%d", round, n)), Labels: map[string]string{"app": "web"}},
					Status:     v1.PodStatus{Conditions: []v1.PodCondition{{Type: v1.PodReady, Status: v1.ConditionTrue}}},
				}
				wg.Go(func() {
					<-start
					err := guard.Kill(ctx, pod, &v1.Container{Name: "app"}, "containerd://"+pod.Name, probespec.Liveness, &v1.Probe{})
					if _, deferred := kill.AsDeferred(err); err != nil && !deferred {
						t.Errorf("node %d: %v", n, err)
					}
				})
			}
			close(start)
			wg.Wait()
			switch got := killed.n.Load(); {
			case got > budget:
				doubles++
				t.Errorf("budget %d, round %d: %d kills went through", budget, round, got)
			case got < budget:
				short++
			}
		}
		t.Logf("budget %d: %d rounds of %d nodes racing; %d double spends, %d rounds with fewer kills than the budget", budget, rounds, nodes, doubles, short)
		if short > 0 {
			t.Errorf("budget %d: %d rounds spent less than the budget (contention refused a kill the budget allowed)", budget, short)
		}
	}
}
