package main

import (
	"errors"
	"os"
	"time"

	v1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/clock"

	"github.com/probed-dev/probed/pkg/kill"
	"github.com/probed-dev/probed/pkg/kubeclient"
	"github.com/probed-dev/probed/pkg/podinformer"
)

// disruptionReleasePeriod is how often the gate looks for restarted pods
// Ready again, to give their disruption back.
const disruptionReleasePeriod = 2 * time.Second

// disruptionBudgets builds the PodDisruptionBudget gate of --pdb-restarts:
// an informer of every namespace's PDBs (read only) and the Ledger's
// Leases in probed's own namespace ($POD_NAMESPACE).
func disruptionBudgets(client kubeclient.Interface, o *options, pods *podinformer.ByUID) (*kill.DisruptionBudgets, cache.SharedIndexInformer, error) {
	ns := os.Getenv("POD_NAMESPACE")
	if ns == "" {
		return nil, nil, errors.New("--pdb-restarts needs $POD_NAMESPACE (the downward API's metadata.namespace): the Leases that count disruptions live there")
	}
	inf := kubeclient.NewInformer(client, client.PolicyV1().PodDisruptionBudgets(metav1.NamespaceAll), &policyv1.PodDisruptionBudget{}, func(*metav1.ListOptions) {})
	return &kill.DisruptionBudgets{
		PDBs: func(namespace string) []*policyv1.PodDisruptionBudget {
			objs, _ := inf.GetIndexer().ByIndex(cache.NamespaceIndex, namespace)
			out := make([]*policyv1.PodDisruptionBudget, 0, len(objs))
			for _, o := range objs {
				out = append(out, o.(*policyv1.PodDisruptionBudget))
			}
			return out
		},
		Synced: inf.HasSynced,
		Ledger: &kill.Ledger{Leases: client.CoordinationV1(), Namespace: ns, Node: o.NodeName, Clock: clock.RealClock{}},
		Pod: func(uid types.UID) *v1.Pod {
			p, _ := pods.Pod(uid)
			return p
		},
		MaxDeferral: o.PDBRestartMaxDeferral,
		Clock:       clock.RealClock{},
	}, inf, nil
}
