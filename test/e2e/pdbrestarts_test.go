//go:build e2e

package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/probed-dev/probed/test/harness/manifest"
)

// applyPDBRestartsGrants creates deploy/pdb-restarts' RBAC: the tier runs
// probed with --pdb-restarts (probedArgs).
func applyPDBRestartsGrants(ctx context.Context) error {
	objs, err := manifest.TypedFiles(filepath.Join(repoRoot, "deploy/pdb-restarts/rbac.yaml"))
	if err != nil {
		return err
	}
	// Before deploy/ makes probed's namespace: the Role and its binding
	// live there, and probed must find them when it starts.
	objs = append([]runtime.Object{&v1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "probed-system"}}}, objs...)
	for _, o := range objs {
		if err := manifest.CreateIfMissing(ctx, client, o); err != nil {
			return fmt.Errorf("deploy/pdb-restarts: %w", err)
		}
	}
	return nil
}

// TestPDBRestartsOnNode puts three bare pods under a PodDisruptionBudget of
// minAvailable 2 (the real disruption controller keeps its status) and
// fails their liveness together while they stay Ready, with probed run
// with --pdb-restarts as the tier runs it. A restart cures a container
// (curedByRestart), so every pod's turn comes: a RestartDisruptionBudget
// Warning names the PDB, at most one pod is ever down at a time, and every
// pod is restarted, one after another as each comes back Ready. (While a
// restart does not cure, the pod restarted first keeps the budget and the
// others keep running: pkg/kill's tests and the scale tier cover that.)
func TestPDBRestartsOnNode(t *testing.T) {
	const name, n = "pdbr", 3
	ctx := context.Background()
	// minAvailable n-1, a budget of one: the disruption controller counts
	// bare pods only against an integer minAvailable (maxUnavailable needs
	// a controller's scale).
	keep := intstr.FromInt32(n - 1)
	pdb := &policyv1.PodDisruptionBudget{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: testNS},
		Spec: policyv1.PodDisruptionBudgetSpec{MinAvailable: &keep,
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": name}}},
	}
	if _, err := client.PolicyV1().PodDisruptionBudgets(testNS).Create(ctx, pdb, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = client.PolicyV1().PodDisruptionBudgets(testNS).Delete(context.Background(), name, metav1.DeleteOptions{})
	})
	outage := newSharedOutage(t, name)
	createBarePods(t, name, n, curedByRestart(t, outage.podTemplate(map[string]string{"app": name})))
	var pods []v1.Pod
	pollT(t, "3 pods Ready", podStartTimeout, func() bool {
		pods = podsOf(t, name)
		return len(pods) == n && notReady(pods) == 0
	})
	livenessPassedOnAll(t, pods)
	pollT(t, "the disruption controller's count of the PDB", time.Minute, func() bool {
		p, err := client.PolicyV1().PodDisruptionBudgets(testNS).Get(ctx, name, metav1.GetOptions{})
		return err == nil && p.Status.CurrentHealthy == n && p.Status.DisruptionsAllowed == 1
	})
	before := map[string]int32{}
	for i := range pods {
		before[pods[i].Name] = appStatus(&pods[i]).RestartCount
	}

	outage.set("all", true)
	began := time.Now()
	deadline := began.Add(3 * time.Minute)
	maxDown, deferrals := 0, 0
	for {
		pods = podsOf(t, name)
		if down := notReady(pods); down > maxDown {
			maxDown = down
		}
		restarted := 0
		for i := range pods {
			if cs := appStatus(&pods[i]); cs != nil && cs.RestartCount > before[pods[i].Name] {
				restarted++
			}
		}
		for _, e := range probedEventsFor(t, name+"-", "RestartDisruptionBudget") {
			if e.Type == warning && strings.Contains(e.Message, "PodDisruptionBudget "+testNS+"/"+name+" allows no disruption now") {
				deferrals++
			}
		}
		if restarted == n && deferrals > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("after %v: %d of %d pods restarted, %d RestartDisruptionBudget events", time.Since(began).Round(time.Second), restarted, n, deferrals)
		}
		time.Sleep(200 * time.Millisecond) // sample the pods' readiness
	}
	outage.set("all", false)
	t.Logf("all %d pods restarted %v after their liveness failed together; at most %d down at once; kills: %d",
		n, time.Since(began).Round(100*time.Millisecond), maxDown, eventsTotal(probedEventsFor(t, name+"-", "Killing")))
	if maxDown > 1 {
		t.Errorf("%d pods were down at once; the PDB allows 1", maxDown)
	}
}

// notReady counts the pods whose Ready condition is not True.
func notReady(pods []v1.Pod) int {
	n := 0
	for i := range pods {
		ready := false
		for _, c := range pods[i].Status.Conditions {
			if c.Type == v1.PodReady {
				ready = c.Status == v1.ConditionTrue
			}
		}
		if !ready {
			n++
		}
	}
	return n
}

// curedByRestart changes tmpl's liveness so that a container started
// while /shared/all exists passes it: it marks itself fresh at start. The
// containers already running when the outage begins fail; each restarted
// one passes.
func curedByRestart(t *testing.T, tmpl v1.PodTemplateSpec) v1.PodTemplateSpec {
	t.Helper()
	live := &v1.Probe{
		ProbeHandler:     execHandler("sh", "-c", `test ! -e /shared/all || test -e /tmp/fresh`),
		PeriodSeconds:    2,
		TimeoutSeconds:   2,
		FailureThreshold: 1,
	}
	annotation, err := json.Marshal(map[string]probes{"app": {Liveness: live}})
	if err != nil {
		t.Fatal(err)
	}
	tmpl.Annotations = map[string]string{"probed.io/probes": string(annotation)}
	tmpl.Spec.Containers[0].Command = []string{"/bin/sh", "-c", `if [ -e /shared/all ]; then touch /tmp/fresh; fi; trap "exit 0" TERM; sleep 100000 & wait`}
	return tmpl
}
