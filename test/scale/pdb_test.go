//go:build scale

package scale

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	v1 "k8s.io/api/core/v1"
	flowv1 "k8s.io/api/flowcontrol/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/informers"
	policylisters "k8s.io/client-go/listers/policy/v1"
	"k8s.io/client-go/tools/cache"

	"github.com/probed-dev/probed/pkg/kill"
	"github.com/probed-dev/probed/test/harness/manifest"
	"github.com/probed-dev/probed/test/scale/apiload"
)

// The shape of TestPDBRestarts. Probes run every 500 ms
// (probed.io/periodMilliseconds), so a liveness failure threshold is
// 1.5 s; a killed container is restarted 500 ms after its exit.
const (
	pdbNS           = "scale-pdb"
	pdbNodes        = 5
	pdbNodeBase     = 900 // scale-n900…: clear of TestScale's nodes, sites and addresses
	pdbPeriodMS     = 500
	pdbLiveFailures = 3
	pdbRestartDelay = 500 * time.Millisecond
	pdbRaceRounds   = 8
	probedNS        = "probed-system"
)

// pdbThreshold is how long a web pod's liveness takes to reach its threshold.
const pdbThreshold = pdbLiveFailures * pdbPeriodMS * time.Millisecond

// TestPDBRestarts is the multi-process proof of --pdb-restarts
// (docs/pdb-restarts.md): five simulated nodes, each with its own probed
// process started with --pdb-restarts and $POD_NAMESPACE, authenticating as
// probed's service account with deploy/pdb-restarts/rbac.yaml's grants,
// over one real kube-apiserver. The test plays every kubelet (a stopped
// container restarts with a new ID, is not Ready until probed's readiness
// gate is True again) and the disruption controller (each PDB's status
// from its pods, every 100 ms). Restarts that are not what is tested are
// out of the way: --liveness-restart-budget=0, and the pods have no
// controller, so the workload guard does not apply.
//
//   - rolling: six web pods under one PDB (maxUnavailable 1), two of them
//     on one node, fail liveness at once and stay Ready; a restart cures a
//     container. Every pod is restarted, one at a time: never two in flight
//     (from the kill until the pod is Ready again) across the nodes, and
//     the pods that waited have a RestartDisruptionBudget Warning event.
//   - outage: the web pods' liveness fails for pdbOutage and a restart
//     does not cure it: restarts go on, still never two in flight.
//   - below budget: readiness fails on every web pod, then liveness too:
//     no kill in four failure thresholds (IfHealthyBudget), and every
//     pod's restart refused (/debug/probes' restartDeferred).
//   - race: five PDBs of two pods each on neighbouring nodes; both pods'
//     liveness probes (failure threshold 1) are held by the target and
//     answered 503 at the same instant, pdbRaceRounds times: each round
//     exactly one kill per PDB (more is a double spend, fewer a budget
//     refused by contention), and some Lease updates conflict (the nodes
//     did race).
//   - control, the probeds restarted without --pdb-restarts: the same web
//     failure kills pods concurrently, and a race kills both pods of every
//     PDB, so the checks above can fail.
//
// API requests on Leases per kill and the gate's added latency (release of
// the 503 to the runtime's StopContainer, with and without the gate) are
// logged, not asserted.
func TestPDBRestarts(t *testing.T) {
	testStart := time.Now()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	e := newPDBEnv(ctx, t)

	on := []string{"--pdb-restarts", "--liveness-restart-budget=0"}
	e.startProbeds(on)
	e.createWorkload()
	t.Logf("set-up: %d nodes, %d web pods and %d race pairs Ready in %.1fs",
		pdbNodes, len(e.web), len(e.pairs), time.Since(testStart).Seconds())

	phase := time.Now()
	lap := func(what string) {
		t.Logf("%s: %.1fs", what, time.Since(phase).Seconds())
		phase = time.Now()
	}
	e.rolling()
	lap("rolling phase")
	e.outage()
	lap("outage phase")
	e.belowBudget()
	lap("below-budget phase")
	onRace := e.race(pdbRaceRounds, 1)
	lap("race rounds")
	if n := e.probedMetric("probed_restarts_pdb_unchecked_total", ""); n != 0 {
		t.Errorf("probed_restarts_pdb_unchecked_total = %g across the nodes; want 0 (a kill bypassed the PDBs)", n)
	}
	t.Logf("across the nodes: probed_restarts_deferred_total{reason=\"pdb\"} %g, probed_container_kills_total{outcome=\"deferred\"} %g",
		e.probedMetric("probed_restarts_deferred_total", `reason="pdb"`), e.probedMetric("probed_container_kills_total", `outcome="deferred"`))

	// The control: the same nodes without the gate.
	e.restartProbeds(slices.DeleteFunc(slices.Clone(on), func(s string) bool { return s == "--pdb-restarts" }))
	lap("restart of every probed without --pdb-restarts")
	e.control()
	offRace := e.race(1, 2)
	lap("control")
	if len(onRace.latencies) > 0 && len(offRace.latencies) > 0 {
		on, off := summarize(onRace.latencies), summarize(offRace.latencies)
		t.Logf("held 503 released → StopContainer: with the gate (winners) p50 %.1f ms p90 %.1f ms max %.1f ms (n=%d); without p50 %.1f ms p90 %.1f ms max %.1f ms (n=%d); added p50 %.1f ms",
			on.P50*1e3, on.P90*1e3, on.Max*1e3, on.N, off.P50*1e3, off.P90*1e3, off.Max*1e3, off.N, (on.P50-off.P50)*1e3)
	}
	t.Logf("disruption controller: %d PDB status updates (%d conflicts); stand-in kubelet write errors %d; wall time %.1fs",
		e.dc.updates.Load(), e.dc.conflicts.Load(), e.k.writeErrors.Load(), time.Since(testStart).Seconds())
}

// pdbEnv is the test's world: the fleet, the recorder, the disruption
// controller and the workload's pods and PDBs.
type pdbEnv struct {
	t      *testing.T
	ctx    context.Context
	f      *fleet
	k      *kubelet
	rec    *pdbRecorder
	dc     *disruptionController
	leases cache.Indexer // probed's namespace's Leases, through a watch

	nodeOf map[string]*simNode // pod key → its node
	web    []string            // the web pods' keys
	pairs  [][2]string         // each race PDB's two pods
	pdbOf  map[string]string   // pod key → its PDB's name
}

func newPDBEnv(ctx context.Context, t *testing.T) *pdbEnv {
	t.Helper()
	if err := applyPDBRestartsRBAC(ctx); err != nil {
		t.Fatal(err)
	}
	if err := cp.EnsureNamespace(ctx, pdbNS); err != nil {
		t.Fatal(err)
	}
	if err := ensureLeaseFlowSchemas(ctx); err != nil {
		t.Fatal(err)
	}
	k := newKubelet(client)
	k.restartDelay = func(int) time.Duration { return pdbRestartDelay }
	e := &pdbEnv{t: t, ctx: ctx, k: k, rec: newPDBRecorder(), nodeOf: map[string]*simNode{}, pdbOf: map[string]string{}}
	e.f = &fleet{t: t, ctx: ctx, k: k}
	k.onKill = func(key string, restarts int) {
		if n := e.nodeOf[key]; n != nil {
			e.rec.kill(key, n.Name, restarts)
		}
	}
	_, _ = k.informer.AddEventHandler(cache.ResourceEventHandlerFuncs{
		UpdateFunc: func(old, obj any) {
			o, p := old.(*v1.Pod), obj.(*v1.Pod)
			if p.Namespace == pdbNS && condStatus(o, string(v1.PodReady)) != condStatus(p, string(v1.PodReady)) {
				e.rec.readyChanged(p.Namespace+"/"+p.Name, condStatus(p, string(v1.PodReady)) == v1.ConditionTrue, restartsOf(p))
			}
		},
	})
	dir := t.TempDir()
	for i := range pdbNodes {
		n, err := newNode(ctx, t, k, pdbNodeBase+i, dir)
		if err != nil {
			t.Fatalf("node %d: %v", i, err)
		}
		n.Env = append(os.Environ(), "POD_NAMESPACE="+probedNS)
		e.f.nodes = append(e.f.nodes, n)
	}
	if err := k.run(ctx, 4); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(e.cleanup)

	pf := informers.NewSharedInformerFactoryWithOptions(client, 0, informers.WithNamespace(pdbNS))
	pdbInf := pf.Policy().V1().PodDisruptionBudgets()
	e.dc = &disruptionController{pdbs: pdbInf.Lister(), k: k}
	lf := informers.NewSharedInformerFactoryWithOptions(client, 0, informers.WithNamespace(probedNS))
	leaseInf := lf.Coordination().V1().Leases()
	e.leases = leaseInf.Informer().GetIndexer()
	pf.Start(ctx.Done())
	lf.Start(ctx.Done())
	if !cache.WaitForCacheSync(ctx.Done(), pdbInf.Informer().HasSynced, leaseInf.Informer().HasSynced) {
		t.Fatal("PDB and Lease informers did not sync")
	}
	go e.dc.run(ctx, 100*time.Millisecond)
	return e
}

// startProbeds starts every node's probed with flags and waits for /readyz.
func (e *pdbEnv) startProbeds(flags []string) {
	e.t.Helper()
	err := e.f.parallelNodes(pdbNodes, func(n *simNode) error {
		if err := n.startProbed(flags); err != nil {
			return err
		}
		return n.Probed.waitReady(e.ctx, 2*time.Minute)
	})
	if err != nil {
		e.t.Fatal(err)
	}
}

// restartProbeds stops every probed and starts it again with flags.
func (e *pdbEnv) restartProbeds(flags []string) {
	e.t.Helper()
	err := e.f.parallelNodes(pdbNodes, func(n *simNode) error {
		if err := n.Probed.Stop(30 * time.Second); err != nil {
			return err
		}
		if _, err := n.Probed.Exited(); err != nil {
			return fmt.Errorf("probed exited with %v after SIGTERM", err)
		}
		if err := n.startProbed(flags); err != nil {
			return err
		}
		return n.Probed.waitReady(e.ctx, 2*time.Minute)
	})
	if err != nil {
		e.t.Fatal(err)
	}
}

// createWorkload creates the web pods (two on the first node, one on each
// other) under PDB web, and the race pairs (pair i on nodes i and i+1)
// under PDBs race-i, all with maxUnavailable 1, and waits until every pod
// is Ready and every PDB allows one disruption.
func (e *pdbEnv) createWorkload() {
	e.t.Helper()
	type podSpec struct {
		n      *simNode
		name   string
		labels map[string]string
		probes string
	}
	var specs []podSpec
	for i := range pdbNodes + 1 {
		n := e.f.nodes[max(0, i-1)]
		name := fmt.Sprintf("web-%d", i)
		specs = append(specs, podSpec{n, name, map[string]string{"app": "web"}, pdbProbes(n.Site.Port, name, pdbLiveFailures, 400)})
		e.web = append(e.web, pdbNS+"/"+name)
		e.pdbOf[pdbNS+"/"+name] = "web"
	}
	pdbs := map[string]map[string]string{"web": {"app": "web"}}
	for i := range pdbNodes {
		pdb := fmt.Sprintf("race-%d", i)
		pdbs[pdb] = map[string]string{"app": "race", "pair": strconv.Itoa(i)}
		var pair [2]string
		for j, n := range []*simNode{e.f.nodes[i], e.f.nodes[(i+1)%pdbNodes]} {
			name := fmt.Sprintf("race-%d-%c", i, 'a'+j)
			// Failure threshold 1, and a timeout that outlasts a hold.
			specs = append(specs, podSpec{n, name, pdbs[pdb], pdbProbes(n.Site.Port, name, 1, 3000)})
			pair[j] = pdbNS + "/" + name
			e.pdbOf[pair[j]] = pdb
		}
		e.pairs = append(e.pairs, pair)
	}
	for name, sel := range pdbs {
		one := intstr.FromInt32(1)
		_, err := client.PolicyV1().PodDisruptionBudgets(pdbNS).Create(e.ctx, &policyv1.PodDisruptionBudget{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: pdbNS},
			Spec:       policyv1.PodDisruptionBudgetSpec{MaxUnavailable: &one, Selector: &metav1.LabelSelector{MatchLabels: sel}},
		}, metav1.CreateOptions{})
		if err != nil {
			e.t.Fatal(err)
		}
	}
	var wg sync.WaitGroup
	errs := make(chan error, len(specs))
	for _, s := range specs {
		e.nodeOf[pdbNS+"/"+s.name] = s.n
		wg.Go(func() {
			if err := s.n.createPodIn(e.ctx, e.k, pdbNS, s.name, s.labels, s.probes); err != nil {
				errs <- fmt.Errorf("pod %s: %w", s.name, err)
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		e.t.Fatal(err)
	}
	e.f.waitPods("every pod Ready through probed's gate", e.allKeys(), 2*time.Minute, readyIs(v1.ConditionTrue))
	for name := range pdbs {
		e.waitPDB(name, "one disruption allowed", 30*time.Second, allowsOne)
	}
}

// pdbProbes is a pod's probes annotation: readiness and liveness on the
// node's site, every 500 ms.
func pdbProbes(port int, pod string, liveFailures, liveTimeoutMS int) string {
	probe := func(path string, failures, timeoutMS int) map[string]any {
		return map[string]any{
			"httpGet":                       map[string]any{"path": path, "port": port},
			"failureThreshold":              failures,
			"probed.io/periodMilliseconds":  pdbPeriodMS,
			"probed.io/timeoutMilliseconds": timeoutMS,
		}
	}
	b, _ := json.Marshal(map[string]any{"app": map[string]any{
		"readinessProbe": probe("/ready/"+pod, 1, 400),
		"livenessProbe":  probe("/live/"+pod, liveFailures, liveTimeoutMS),
	}})
	return string(b)
}

func (e *pdbEnv) allKeys() []string {
	keys := slices.Clone(e.web)
	for _, p := range e.pairs {
		keys = append(keys, p[0], p[1])
	}
	return keys
}

// rolling: every web pod fails liveness at once, Ready all along; a kill
// cures its container. They must go one at a time, all of them.
func (e *pdbEnv) rolling() {
	t := e.t
	t.Helper()
	for _, key := range e.web {
		e.rec.healOnKill(key, e.healer(key))
	}
	before := e.f.scrape()
	from := time.Now()
	e.setFailing("live", true, e.web)
	deadline := from.Add(2 * time.Minute)
	for {
		missing := e.notKilledSince(e.web, from)
		if len(missing) == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("rolling: %v not restarted within 2m of their liveness failing (kills: %v)", missing, e.rec.killsSince(from))
		}
		time.Sleep(100 * time.Millisecond)
	}
	e.f.waitPods("web pods Ready again after their restart", e.web, time.Minute, readyIs(v1.ConditionTrue))
	e.waitPDB("web", "one disruption allowed", 30*time.Second, allowsOne)
	e.waitLedgerEmpty("web", 30*time.Second)
	after := e.f.scrape()
	kills := e.rec.killsOf(e.web, from)
	flights, most := e.rec.flights(kills)
	var timeline strings.Builder
	for _, fl := range flights {
		fmt.Fprintf(&timeline, "\n  %-20s %s  killed +%5.2fs  Ready again +%5.2fs", fl.Key, fl.Node, fl.At.Sub(from).Seconds(), fl.Ready.Sub(from).Seconds())
	}
	t.Logf("rolling: %d kills of %d web pods over %.1fs, at most %d in flight:%s", len(kills), len(e.web), kills[len(kills)-1].At.Sub(from).Seconds(), most, timeline.String())
	if most > 1 {
		t.Errorf("rolling: %d web pods in flight at once under a PDB with maxUnavailable 1; want at most 1 (overlaps: %v)", most, overlaps(flights))
	}
	for _, fl := range flights {
		if fl.Ready.IsZero() {
			t.Errorf("rolling: %s never Ready again after its kill at %v", fl.Key, fl.At)
		}
	}
	per := map[string]int{}
	for _, k := range kills {
		per[k.Key]++
	}
	for _, key := range e.web {
		if per[key] != 1 {
			t.Errorf("rolling: %s killed %d times; want once (a restart cures it)", key, per[key])
		}
	}
	// Every pod but the first killed waited, and said so.
	first := kills[0].Key
	var waited []string
	e.eventually("a RestartDisruptionBudget event on every web pod that waited", 15*time.Second, func() bool {
		waited = waited[:0]
		evs := e.budgetEvents()
		for _, key := range e.web {
			if key == first {
				continue
			}
			if slices.ContainsFunc(evs[podName(key)], func(ev v1.Event) bool {
				return ev.Type == v1.EventTypeWarning && strings.Contains(ev.Message, "PodDisruptionBudget "+pdbNS+"/web allows no disruption now")
			}) {
				waited = append(waited, podName(key))
			}
		}
		return len(waited) == len(e.web)-1
	})
	t.Logf("rolling: RestartDisruptionBudget events on %v (the first killed, %s, did not wait)", waited, podName(first))
	e.logLeaseRequests("rolling", before, after, len(kills))
}

// pdbOutage is how long the outage phase keeps the web pods' liveness
// failing: several restarts' worth.
const pdbOutage = 8 * time.Second

// outage: a dependency every web pod shares is down for pdbOutage; a
// restart does not cure a container. Restarts go on one at a time, a pod
// killed again while the disruption of its last restart is still
// recorded going under that record (budgetJudgement.Held).
func (e *pdbEnv) outage() {
	t := e.t
	t.Helper()
	from := time.Now()
	e.setFailing("live", true, e.web)
	for time.Since(from) < pdbOutage {
		if _, most := e.rec.flights(e.rec.killsOf(e.web, from)); most > 1 {
			break // reported below
		}
		time.Sleep(50 * time.Millisecond)
	}
	e.setFailing("live", false, e.web)
	healed := time.Now()
	e.f.waitPods("web pods Ready after the outage", e.web, time.Minute, readyIs(v1.ConditionTrue))
	e.waitPDB("web", "one disruption allowed", 30*time.Second, allowsOne)
	e.waitLedgerEmpty("web", 30*time.Second)
	kills := e.rec.killsOf(e.web, from)
	flights, most := e.rec.flights(kills)
	var timeline strings.Builder
	again := 0
	for i, fl := range flights {
		fmt.Fprintf(&timeline, "\n  %-20s %s  killed +%5.2fs  Ready again +%5.2fs", fl.Key, fl.Node, fl.At.Sub(from).Seconds(), fl.Ready.Sub(from).Seconds())
		if i > 0 && flights[i-1].Key == fl.Key {
			again++
		}
	}
	t.Logf("outage of %v: %d kills (%d of the pod killed just before), at most %d in flight:%s", healed.Sub(from).Round(100*time.Millisecond), len(kills), again, most, timeline.String())
	if most > 1 {
		t.Errorf("outage: %d web pods in flight at once; want at most 1 (overlaps: %v)", most, overlaps(flights))
	}
	if len(kills) < 2 {
		t.Errorf("outage: %d kills in %v of failing liveness; want restarts to go on, one after another", len(kills), pdbOutage)
	}
	for _, fl := range flights {
		if fl.Ready.IsZero() {
			t.Errorf("outage: %s never Ready again after its kill at %v", fl.Key, fl.At)
		}
	}
}

// belowBudget: readiness fails on every web pod, then liveness: the
// workload is below its budget and nothing may be restarted.
func (e *pdbEnv) belowBudget() {
	t := e.t
	t.Helper()
	e.setFailing("ready", true, e.web)
	e.f.waitPods("web pods not Ready", e.web, 30*time.Second, readyIs(v1.ConditionFalse))
	e.waitPDB("web", "no healthy pod, no disruption allowed", 30*time.Second, func(p *policyv1.PodDisruptionBudget) bool {
		return p.Status.CurrentHealthy == 0 && p.Status.DisruptionsAllowed == 0
	})
	from := time.Now()
	e.setFailing("live", true, e.web)
	watch := 4 * pdbThreshold
	for time.Since(from) < watch {
		if k := e.rec.killsOf(e.web, from); len(k) > 0 {
			t.Errorf("below budget: %d web pods killed while none was Ready: %v", len(k), k)
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	// The failure thresholds were reached: every pod's restart was refused,
	// as its node's /debug/probes says (restartDeferred). The events are
	// logged, not required: client-go's spam filter, probed's as the
	// kubelet's, drops a pod's events past 25 from one source, and the
	// Unhealthy events of 500 ms probes get there within the test.
	want := fmt.Sprintf("PodDisruptionBudget %s/web allows no disruption now (0 of %d desired pods healthy", pdbNS, len(e.web)-1)
	var refused []string
	ok := e.eventually("every web pod's restart refused in /debug/probes", 15*time.Second, func() bool {
		refused = refused[:0]
		for _, key := range e.web {
			if strings.Contains(e.restartDeferred(key), want) {
				refused = append(refused, podName(key))
			}
		}
		return len(refused) == len(e.web)
	})
	var reported []string
	evs := e.budgetEvents()
	for _, key := range e.web {
		if slices.ContainsFunc(evs[podName(key)], func(ev v1.Event) bool { return strings.Contains(ev.Message, want) }) {
			reported = append(reported, podName(key))
		}
	}
	if ok {
		t.Logf("below budget: no kill in %v (%d liveness thresholds); restarts refused (/debug/probes) of %v; RestartDisruptionBudget events on %v",
			watch, int(watch/pdbThreshold), refused, reported)
	} else {
		e.logEvents()
	}
	e.setFailing("live", false, e.web)
	e.setFailing("ready", false, e.web)
	e.f.waitPods("web pods Ready again", e.web, time.Minute, readyIs(v1.ConditionTrue))
	e.waitPDB("web", "one disruption allowed", 30*time.Second, allowsOne)
}

type raceResult struct {
	rounds, doubles, shorts int
	latencies               []time.Duration // release of the 503 → StopContainer
}

// race runs rounds in which every race pair's liveness probes are held
// and answered 503 at the same instant: with the gate, want 1 kill per
// PDB per round; without, 2.
func (e *pdbEnv) race(rounds, want int) raceResult {
	t := e.t
	t.Helper()
	mode := "with --pdb-restarts"
	if want != 1 {
		mode = "without --pdb-restarts (control)"
	}
	var r raceResult
	var keys []string
	for _, p := range e.pairs {
		keys = append(keys, p[0], p[1])
	}
	before := e.f.scrape()
	kills := 0
	for round := range rounds {
		e.raceReady(keys, want == 1)
		for _, key := range keys {
			e.nodeOf[key].Site.hold("/live/" + podName(key))
		}
		e.eventually("every race pod's liveness probe held", 10*time.Second, func() bool {
			for _, key := range keys {
				if e.nodeOf[key].Site.parked("/live/"+podName(key)) == 0 {
					return false
				}
			}
			return true
		})
		released := time.Now()
		for _, key := range keys {
			e.nodeOf[key].Site.release("/live/" + podName(key))
		}
		// The first kill of each PDB, then every restart done and every
		// disruption given back: a late second kill would show by then.
		deadline := time.Now().Add(10 * time.Second)
		for time.Now().Before(deadline) && len(e.pdbsKilled(e.rec.killsOf(keys, released))) < len(e.pairs) {
			time.Sleep(20 * time.Millisecond)
		}
		e.raceReady(keys, want == 1)
		got := e.rec.killsOf(keys, released)
		kills += len(got)
		per := map[string]int{}
		for _, k := range got {
			per[e.pdbOf[k.Key]]++
			r.latencies = append(r.latencies, k.At.Sub(released))
		}
		for i := range e.pairs {
			pdb := fmt.Sprintf("race-%d", i)
			switch n := per[pdb]; {
			case n > want:
				r.doubles++
				t.Errorf("race %s, round %d: %d kills under %s; want %d", mode, round, n, pdb, want)
			case n < want:
				r.shorts++
				t.Errorf("race %s, round %d: %d kills under %s; want %d", mode, round, n, pdb, want)
			}
		}
		r.rounds++
	}
	after := e.f.scrape()
	conflicts := after.Sub(before)["code PUT leases 409"]
	t.Logf("race %s: %d rounds × %d PDBs, two nodes each: %d kills, %d rounds×PDBs over %d kills, %d under; %g Lease updates refused with 409 Conflict",
		mode, r.rounds, len(e.pairs), kills, r.doubles, want, r.shorts, conflicts)
	if want == 1 {
		e.logLeaseRequests("race", before, after, kills)
		if conflicts == 0 {
			t.Errorf("race %s: no Lease update conflicted in %d rounds: the nodes never raced for a disruption", mode, r.rounds)
		}
	}
	return r
}

// raceReady waits until every race pod is Ready, every race PDB allows one
// disruption and (with the gate) no Lease holds a record.
func (e *pdbEnv) raceReady(keys []string, gate bool) {
	e.t.Helper()
	e.f.waitPods("race pods Ready", keys, time.Minute, readyIs(v1.ConditionTrue))
	for i := range e.pairs {
		pdb := fmt.Sprintf("race-%d", i)
		e.waitPDB(pdb, "one disruption allowed", 30*time.Second, allowsOne)
		if gate {
			e.waitLedgerEmpty(pdb, 30*time.Second)
		}
	}
}

// control: without the gate, the web failure kills pods concurrently.
func (e *pdbEnv) control() {
	t := e.t
	t.Helper()
	e.f.waitPods("web pods Ready after the restart of probed", e.web, time.Minute, readyIs(v1.ConditionTrue))
	for _, key := range e.web {
		e.rec.healOnKill(key, e.healer(key))
	}
	from := time.Now()
	e.setFailing("live", true, e.web)
	deadline := from.Add(time.Minute)
	for len(e.notKilledSince(e.web, from)) > 0 {
		if time.Now().After(deadline) {
			t.Fatalf("control: %v not killed within 1m", e.notKilledSince(e.web, from))
		}
		time.Sleep(50 * time.Millisecond)
	}
	e.f.waitPods("web pods Ready again", e.web, time.Minute, readyIs(v1.ConditionTrue))
	kills := e.rec.killsOf(e.web, from)
	_, most := e.rec.flights(kills)
	t.Logf("control: without --pdb-restarts %d web pods killed %.2fs to %.2fs after their liveness failed (threshold %v), up to %d in flight at once",
		len(kills), kills[0].At.Sub(from).Seconds(), kills[len(kills)-1].At.Sub(from).Seconds(), pdbThreshold, most)
	if most < 2 {
		t.Errorf("control: at most %d web pod in flight without the gate; want several (the rolling check could not fail)", most)
	}
}

// setFailing marks the probe path kind ("ready" or "live") of the pods
// failing or healthy, on their nodes' sites.
func (e *pdbEnv) setFailing(kind string, v bool, keys []string) {
	for _, key := range keys {
		e.nodeOf[key].Site.setFailing(v, "/"+kind+"/"+podName(key))
	}
}

// healer makes the pod's liveness target healthy: called at its kill, the
// restarted container is a healthy one.
func (e *pdbEnv) healer(key string) func() {
	return func() { e.nodeOf[key].Site.setFailing(false, "/live/"+podName(key)) }
}

func (e *pdbEnv) notKilledSince(keys []string, from time.Time) []string {
	var out []string
	for _, key := range keys {
		if len(e.rec.killsOf([]string{key}, from)) == 0 {
			out = append(out, key)
		}
	}
	return out
}

func (e *pdbEnv) pdbsKilled(kills []pdbKill) map[string]bool {
	out := map[string]bool{}
	for _, k := range kills {
		out[e.pdbOf[k.Key]] = true
	}
	return out
}

func allowsOne(p *policyv1.PodDisruptionBudget) bool {
	return p.Status.ObservedGeneration == p.Generation && p.Status.DisruptionsAllowed == 1
}

// waitPDB polls the PDB (from the informer) until ok holds.
func (e *pdbEnv) waitPDB(name, what string, timeout time.Duration, ok func(*policyv1.PodDisruptionBudget) bool) {
	e.t.Helper()
	var last *policyv1.PodDisruptionBudget
	if !e.poll(timeout, func() bool {
		p, err := e.dc.pdbs.PodDisruptionBudgets(pdbNS).Get(name)
		last = p
		return err == nil && ok(p)
	}) {
		if last != nil {
			e.t.Fatalf("PDB %s: not %s within %v: generation %d, status %+v", name, what, timeout, last.Generation, last.Status)
		}
		e.t.Fatalf("PDB %s: not %s within %v", name, what, timeout)
	}
}

// waitLedgerEmpty waits until the PDB's Lease holds no live record: every
// disruption spent under it given back.
func (e *pdbEnv) waitLedgerEmpty(pdb string, timeout time.Duration) {
	e.t.Helper()
	p, err := e.dc.pdbs.PodDisruptionBudgets(pdbNS).Get(pdb)
	if err != nil {
		e.t.Fatal(err)
	}
	var records map[string]ledgerRecord
	if !e.poll(timeout, func() bool {
		records = e.ledger(p.UID)
		return len(records) == 0
	}) {
		e.t.Fatalf("PDB %s: the Ledger still holds %v after %v", pdb, records, timeout)
	}
}

type ledgerRecord struct {
	Pod   string      `json:"pod"`
	Node  string      `json:"node"`
	Until metav1.Time `json:"until"`
}

// ledger is the live records of the PDB's Lease (kill.Ledger's format).
func (e *pdbEnv) ledger(uid types.UID) map[string]ledgerRecord {
	obj, ok, _ := e.leases.GetByKey(probedNS + "/probed-pdb-" + string(uid))
	if !ok {
		return nil
	}
	records := map[string]ledgerRecord{}
	_ = json.Unmarshal([]byte(obj.(*coordinationv1.Lease).Annotations[kill.DisruptionsAnnotation]), &records)
	for k, r := range records {
		if !time.Now().Before(r.Until.Time) {
			delete(records, k)
		}
	}
	return records
}

// budgetEvents lists the RestartDisruptionBudget events by pod name.
func (e *pdbEnv) budgetEvents() map[string][]v1.Event {
	list, err := client.CoreV1().Events(pdbNS).List(e.ctx, metav1.ListOptions{
		FieldSelector: fields.OneTermEqualSelector("reason", kill.ReasonDisruptionBudget).String(),
	})
	if err != nil {
		e.t.Logf("listing events: %v", err)
		return nil
	}
	out := map[string][]v1.Event{}
	for _, ev := range list.Items {
		out[ev.InvolvedObject.Name] = append(out[ev.InvolvedObject.Name], ev)
	}
	return out
}

// restartDeferred is why the pod's liveness restart is deferred, from its
// node's /debug/probes ("" if it is not).
func (e *pdbEnv) restartDeferred(key string) string {
	resp, err := probedHTTP.Get("http://" + e.nodeOf[key].Probed.Addr + "/debug/probes?namespace=" + pdbNS + "&pod=" + podName(key))
	if err != nil {
		return ""
	}
	defer resp.Body.Close()
	var snaps []struct {
		ProbeType       string `json:"probeType"`
		RestartDeferred string `json:"restartDeferred"`
	}
	if json.NewDecoder(resp.Body).Decode(&snaps) != nil {
		return ""
	}
	for _, s := range snaps {
		if s.ProbeType == "Liveness" {
			return s.RestartDeferred
		}
	}
	return ""
}

// logEvents logs the test's pods' events, for a failure.
func (e *pdbEnv) logEvents() {
	list, err := client.CoreV1().Events(pdbNS).List(e.ctx, metav1.ListOptions{})
	if err != nil {
		e.t.Logf("listing events: %v", err)
		return
	}
	var b strings.Builder
	for _, ev := range list.Items {
		fmt.Fprintf(&b, "\n  %s %s %s ×%d %s: %s", ev.LastTimestamp.Format("15:04:05"), ev.InvolvedObject.Name, ev.Reason, ev.Count, ev.Type, ev.Message)
	}
	e.t.Logf("events in %s:%s", pdbNS, b.String())
}

// eventually polls ok, and fails the test (not fatally) if it does not
// hold within timeout.
func (e *pdbEnv) eventually(what string, timeout time.Duration, ok func() bool) bool {
	e.t.Helper()
	if !e.poll(timeout, ok) {
		e.t.Errorf("not within %v: %s", timeout, what)
		return false
	}
	return true
}

func (e *pdbEnv) poll(timeout time.Duration, ok func() bool) bool {
	err := wait.PollUntilContextTimeout(e.ctx, 50*time.Millisecond, timeout, true, func(context.Context) (bool, error) { return ok(), nil })
	return err == nil
}

// logLeaseRequests logs the Lease requests of a phase per kill: all of
// the apiserver's (apiserver_request_total, which also counts the
// apiserver's own lease renewals) and probed's alone, by verb (APF).
func (e *pdbEnv) logLeaseRequests(phase string, before, after apiload.Counters, kills int) {
	if kills == 0 {
		return
	}
	d := after.Sub(before)
	var all, probed strings.Builder
	var allSum, probedSum float64
	for _, verb := range []string{"GET", "PUT", "POST", "LIST", "WATCH"} {
		if v := d["req "+verb+" leases"]; v > 0 {
			fmt.Fprintf(&all, " %s %.2f", verb, v/float64(kills))
			allSum += v
		}
	}
	for _, verb := range leaseVerbs {
		if v := d["fs "+leaseFlowSchema(verb)]; v > 0 {
			fmt.Fprintf(&probed, " %s %.2f", verb, v/float64(kills))
			probedSum += v
		}
	}
	e.t.Logf("%s: Lease requests per kill (%d kills): probed's %.2f (%s ), all the apiserver's %.2f (%s ); conflicts %g",
		phase, kills, probedSum/float64(kills), probed.String(), allSum/float64(kills), all.String(), d["code PUT leases 409"])
}

// probedMetric sums a metric of every probed's /metrics over the lines
// that contain match.
func (e *pdbEnv) probedMetric(metric, match string) float64 {
	var sum float64
	for _, n := range e.f.nodes {
		resp, err := probedHTTP.Get("http://" + n.Probed.Addr + "/metrics")
		if err != nil {
			e.t.Errorf("%s /metrics: %v", n.Name, err)
			continue
		}
		sc := bufio.NewScanner(resp.Body)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		for sc.Scan() {
			line := sc.Text()
			if !strings.HasPrefix(line, metric) || !strings.Contains(line, match) {
				continue
			}
			if rest, ok := strings.CutPrefix(line, metric); ok && (rest[0] == ' ' || rest[0] == '{') {
				if v, err := strconv.ParseFloat(line[strings.LastIndexByte(line, ' ')+1:], 64); err == nil {
					sum += v
				}
			}
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			e.t.Errorf("%s /metrics: %s", n.Name, resp.Status)
		}
	}
	return sum
}

// cleanup deletes what the test made that a later test's stand-in kubelet
// or probed could see: the pods, the PDBs, the Leases, the flow schemas.
func (e *pdbEnv) cleanup() {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	e.f.stopAll()
	zero := int64(0)
	_ = client.CoreV1().Pods(pdbNS).DeleteCollection(ctx, metav1.DeleteOptions{GracePeriodSeconds: &zero}, metav1.ListOptions{})
	_ = client.PolicyV1().PodDisruptionBudgets(pdbNS).DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{})
	for _, obj := range e.leases.List() {
		if l := obj.(*coordinationv1.Lease); strings.HasPrefix(l.Name, "probed-pdb-") {
			_ = client.CoordinationV1().Leases(probedNS).Delete(ctx, l.Name, metav1.DeleteOptions{})
		}
	}
	for _, verb := range leaseVerbs {
		_ = client.FlowcontrolV1().FlowSchemas().Delete(ctx, leaseFlowSchema(verb), metav1.DeleteOptions{})
	}
	for _, n := range e.f.nodes {
		_ = client.CoreV1().Nodes().Delete(ctx, n.Name, metav1.DeleteOptions{})
	}
}

func podName(key string) string { _, n, _ := strings.Cut(key, "/"); return n }

func restartsOf(p *v1.Pod) int {
	if len(p.Status.ContainerStatuses) == 0 {
		return 0
	}
	return int(p.Status.ContainerStatuses[0].RestartCount)
}

// pdbRecorder records every kill the runtimes take and every Ready
// transition of the test's pods.
type pdbRecorder struct {
	mu    sync.Mutex
	kills []pdbKill
	ready map[string][]readyChange
	heal  map[string]func()
}

type pdbKill struct {
	Key, Node string
	At        time.Time
	Restarts  int // before the kill
}

type readyChange struct {
	At       time.Time
	Ready    bool
	Restarts int
}

func newPDBRecorder() *pdbRecorder {
	return &pdbRecorder{ready: map[string][]readyChange{}, heal: map[string]func(){}}
}

func (r *pdbRecorder) kill(key, node string, restarts int) {
	at := time.Now()
	r.mu.Lock()
	r.kills = append(r.kills, pdbKill{key, node, at, restarts})
	heal := r.heal[key]
	delete(r.heal, key)
	r.mu.Unlock()
	if heal != nil {
		heal()
	}
}

// healOnKill runs heal at the pod's next kill.
func (r *pdbRecorder) healOnKill(key string, heal func()) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.heal[key] = heal
}

func (r *pdbRecorder) readyChanged(key string, ready bool, restarts int) {
	at := time.Now()
	r.mu.Lock()
	defer r.mu.Unlock()
	r.ready[key] = append(r.ready[key], readyChange{at, ready, restarts})
}

func (r *pdbRecorder) killsSince(from time.Time) []pdbKill {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []pdbKill
	for _, k := range r.kills {
		if !k.At.Before(from) {
			out = append(out, k)
		}
	}
	return out
}

func (r *pdbRecorder) killsOf(keys []string, from time.Time) []pdbKill {
	return slices.DeleteFunc(r.killsSince(from), func(k pdbKill) bool { return !slices.Contains(keys, k.Key) })
}

// flight is a kill until its pod was Ready again with the restarted
// container (zero: not yet).
type flight struct {
	pdbKill
	Ready time.Time
}

// flights pairs each kill with its pod's first Ready transition after it
// with a later container, and returns the most flights at any moment (an
// unfinished one lasts for ever).
func (r *pdbRecorder) flights(kills []pdbKill) ([]flight, int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []flight
	type edge struct {
		at    time.Time
		delta int
	}
	var edges []edge
	for _, k := range kills {
		fl := flight{pdbKill: k}
		for _, c := range r.ready[k.Key] {
			if c.Ready && c.At.After(k.At) && c.Restarts > k.Restarts {
				fl.Ready = c.At
				break
			}
		}
		out = append(out, fl)
		edges = append(edges, edge{k.At, 1})
		if !fl.Ready.IsZero() {
			edges = append(edges, edge{fl.Ready, -1})
		}
	}
	// Ends before starts at the same instant.
	slices.SortFunc(edges, func(a, b edge) int {
		if c := a.at.Compare(b.at); c != 0 {
			return c
		}
		return a.delta - b.delta
	})
	most, cur := 0, 0
	for _, ed := range edges {
		cur += ed.delta
		most = max(most, cur)
	}
	return out, most
}

// overlaps lists the pairs of flights that overlap, for a failure message.
func overlaps(fs []flight) []string {
	var out []string
	end := func(f flight) time.Time {
		if f.Ready.IsZero() {
			return time.Now().Add(time.Hour)
		}
		return f.Ready
	}
	for i, a := range fs {
		for _, b := range fs[i+1:] {
			if a.At.Before(end(b)) && b.At.Before(end(a)) {
				out = append(out, fmt.Sprintf("%s (%s, %s–%s) and %s (%s, %s–%s)",
					a.Key, a.Node, a.At.Format("15:04:05.000"), a.Ready.Format("15:04:05.000"),
					b.Key, b.Node, b.At.Format("15:04:05.000"), b.Ready.Format("15:04:05.000")))
			}
		}
	}
	return out
}

// disruptionController is the test's kube-controller-manager disruption
// controller: every period, each PDB's status from its pods (the stand-in
// kubelet's cache), written with UpdateStatus when it changed.
// expectedPods is the pods the selector matches (the pods have no
// controller whose scale the real one would read).
type disruptionController struct {
	pdbs      policylisters.PodDisruptionBudgetLister
	k         *kubelet
	updates   atomic.Int64
	conflicts atomic.Int64
}

func (d *disruptionController) run(ctx context.Context, period time.Duration) {
	wait.UntilWithContext(ctx, d.sync, period)
}

func (d *disruptionController) sync(ctx context.Context) {
	pdbs, err := d.pdbs.PodDisruptionBudgets(pdbNS).List(labels.Everything())
	if err != nil {
		return
	}
	for _, pdb := range pdbs {
		sel, err := metav1.LabelSelectorAsSelector(pdb.Spec.Selector)
		if err != nil || pdb.Spec.MaxUnavailable == nil {
			continue
		}
		pods, err := d.k.lister.Pods(pdb.Namespace).List(sel)
		if err != nil {
			continue
		}
		var healthy int32
		for _, p := range pods {
			if p.DeletionTimestamp == nil && condStatus(p, string(v1.PodReady)) == v1.ConditionTrue {
				healthy++
			}
		}
		expected := int32(len(pods))
		desired := max(0, expected-int32(pdb.Spec.MaxUnavailable.IntValue()))
		allowed := max(0, healthy-desired)
		st := *pdb.Status.DeepCopy()
		st.ObservedGeneration = pdb.Generation
		st.ExpectedPods, st.CurrentHealthy, st.DesiredHealthy, st.DisruptionsAllowed = expected, healthy, desired, allowed
		c := metav1.Condition{Type: policyv1.DisruptionAllowedCondition, Status: metav1.ConditionTrue,
			Reason: policyv1.SufficientPodsReason, ObservedGeneration: pdb.Generation}
		if allowed == 0 {
			c.Status, c.Reason = metav1.ConditionFalse, policyv1.InsufficientPodsReason
		}
		meta.SetStatusCondition(&st.Conditions, c)
		if equality.Semantic.DeepEqual(st, pdb.Status) {
			continue
		}
		upd := pdb.DeepCopy()
		upd.Status = st
		_, err = client.PolicyV1().PodDisruptionBudgets(pdb.Namespace).UpdateStatus(ctx, upd, metav1.UpdateOptions{})
		switch {
		case err == nil:
			d.updates.Add(1)
		case apierrors.IsConflict(err):
			d.conflicts.Add(1) // the informer is behind; next period
		}
	}
}

// applyPDBRestartsRBAC applies deploy/pdb-restarts/rbac.yaml: the grants
// --pdb-restarts needs, for probed's service account, which every
// probed here authenticates as.
func applyPDBRestartsRBAC(ctx context.Context) error {
	path := filepath.Join("../../deploy/pdb-restarts", "rbac.yaml")
	objs, err := manifest.TypedFiles(path)
	if err != nil {
		return err
	}
	for _, obj := range objs {
		if err := manifest.CreateIfMissing(ctx, client, obj); err != nil {
			return fmt.Errorf("%s: %w", path, err)
		}
	}
	return nil
}

// leaseVerbs are the verbs of probed's Lease requests counted apart.
var leaseVerbs = []string{"get", "update", "create", "list", "watch"}

func leaseFlowSchema(verb string) string { return "scale-pdb-probed-leases-" + verb }

// ensureLeaseFlowSchemas counts probed's Lease requests by verb, through
// FlowSchemas ahead of apiload's (apiserver_request_total has no user
// label, and the apiserver renews leases of its own).
func ensureLeaseFlowSchemas(ctx context.Context) error {
	fc := client.FlowcontrolV1()
	for i, verb := range leaseVerbs {
		_, err := fc.FlowSchemas().Create(ctx, &flowv1.FlowSchema{
			ObjectMeta: metav1.ObjectMeta{Name: leaseFlowSchema(verb)},
			Spec: flowv1.FlowSchemaSpec{
				PriorityLevelConfiguration: flowv1.PriorityLevelConfigurationReference{Name: "scale"},
				MatchingPrecedence:         int32(90 + i),
				DistinguisherMethod:        &flowv1.FlowDistinguisherMethod{Type: flowv1.FlowDistinguisherMethodByUserType},
				Rules: []flowv1.PolicyRulesWithSubjects{{
					Subjects: []flowv1.Subject{{Kind: flowv1.SubjectKindServiceAccount,
						ServiceAccount: &flowv1.ServiceAccountSubject{Namespace: probedNS, Name: "probed"}}},
					ResourceRules: []flowv1.ResourcePolicyRule{{Verbs: []string{verb}, APIGroups: []string{"coordination.k8s.io"},
						Resources: []string{"leases"}, Namespaces: []string{flowv1.NamespaceEvery}}},
				}},
			},
		}, metav1.CreateOptions{})
		if err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("flow schema %s: %w", leaseFlowSchema(verb), err)
		}
	}
	return wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		for _, verb := range leaseVerbs {
			fs, err := fc.FlowSchemas().Get(ctx, leaseFlowSchema(verb), metav1.GetOptions{})
			if err != nil {
				return false, nil
			}
			if !slices.ContainsFunc(fs.Status.Conditions, func(c flowv1.FlowSchemaCondition) bool {
				return c.Type == flowv1.FlowSchemaConditionDangling && c.Status == flowv1.ConditionFalse
			}) {
				return false, nil
			}
		}
		return true, nil
	})
}
