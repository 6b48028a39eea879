//go:build e2e

package e2e

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
)

// The restart guard (docs/security.md) on the real node. Its pods' liveness
// probes fail together through a file on the host: each container mounts a
// host dir at /shared, and its probe passes unless /shared/all or
// /shared/<pod name> exists. The test flips those files from the host.

// sharedOutage is a host dir the guard test's pods mount.
type sharedOutage struct {
	t   *testing.T
	dir string
}

func newSharedOutage(t *testing.T, name string) *sharedOutage {
	t.Helper()
	dir := filepath.Join(nd.RunDir, "e2e-"+name)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	return &sharedOutage{t: t, dir: dir}
}

// set makes the liveness of pod ("all" for every pod) fail or pass.
func (o *sharedOutage) set(pod string, failing bool) {
	o.t.Helper()
	p := filepath.Join(o.dir, pod)
	var err error
	if failing {
		err = os.WriteFile(p, nil, 0o644)
	} else {
		err = os.Remove(p)
	}
	if err != nil {
		o.t.Fatal(err)
	}
	o.t.Logf("%s: /shared/%s failing=%v", time.Now().Format("15:04:05.000"), pod, failing)
}

// podSpec runs busybox idling, with the outage dir at /shared and a liveness
// exec probe (period 2 s, threshold 1) in the probes annotation.
func (o *sharedOutage) podTemplate(labels map[string]string) v1.PodTemplateSpec {
	live := &v1.Probe{
		ProbeHandler:     execHandler("sh", "-c", `test ! -e /shared/all && test ! -e "/shared/$POD_NAME"`),
		PeriodSeconds:    2,
		TimeoutSeconds:   2,
		FailureThreshold: 1,
	}
	annotation, err := json.Marshal(map[string]probes{"app": {Liveness: live}})
	if err != nil {
		o.t.Fatal(err)
	}
	return v1.PodTemplateSpec{
		ObjectMeta: metav1.ObjectMeta{Labels: labels, Annotations: map[string]string{"probed.io/probes": string(annotation)}},
		Spec: v1.PodSpec{
			TerminationGracePeriodSeconds: ptr(int64(1)),
			AutomountServiceAccountToken:  ptr(false),
			EnableServiceLinks:            ptr(false),
			Containers: []v1.Container{{
				Name: "app", Image: imgBusybox, ImagePullPolicy: v1.PullNever,
				Command: []string{"/bin/sh", "-c", `trap "exit 0" TERM; sleep 100000 & wait`},
				Env: []v1.EnvVar{{Name: "POD_NAME", ValueFrom: &v1.EnvVarSource{
					FieldRef: &v1.ObjectFieldSelector{FieldPath: "metadata.name"}}}},
				VolumeMounts: []v1.VolumeMount{{Name: "shared", MountPath: "/shared"}},
			}},
			Volumes: []v1.Volume{{Name: "shared", VolumeSource: v1.VolumeSource{
				HostPath: &v1.HostPathVolumeSource{Path: o.dir, Type: ptr(v1.HostPathDirectory)}}}},
		},
	}
}

// createBarePods creates n pods of tmpl without a controller, named
// <name>-<i> in testNS, deleted at once when the test ends.
func createBarePods(t *testing.T, name string, n int, tmpl v1.PodTemplateSpec) {
	t.Helper()
	for i := range n {
		p := &v1.Pod{ObjectMeta: *tmpl.ObjectMeta.DeepCopy(), Spec: *tmpl.Spec.DeepCopy()}
		p.Name, p.Namespace = fmt.Sprintf("%s-%d", name, i), testNS
		if _, err := client.CoreV1().Pods(testNS).Create(context.Background(), p, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			_ = client.CoreV1().Pods(testNS).Delete(context.Background(), p.Name, metav1.DeleteOptions{GracePeriodSeconds: ptr(int64(0))})
		})
	}
}

// scrape returns probed's metric samples whose line starts with prefix, summed.
func scrape(t *testing.T, prefix string) float64 {
	t.Helper()
	var sum float64
	err := wait.PollUntilContextTimeout(context.Background(), time.Second, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		body, err := nd.ProbedGet(ctx, "/metrics")
		if err != nil {
			return false, nil
		}
		sum = 0
		sc := bufio.NewScanner(bytes.NewReader(body))
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		for sc.Scan() {
			l := sc.Text()
			if !strings.HasPrefix(l, prefix) {
				continue
			}
			f := strings.Fields(l)
			v, err := strconv.ParseFloat(f[len(f)-1], 64)
			if err == nil {
				sum += v
			}
		}
		return true, nil
	})
	if err != nil {
		t.Fatalf("scraping %s: %v", nd.ProbedMetricsURL(), err)
	}
	return sum
}

// podsOf lists the pods with the label app=name in testNS, not being deleted.
func podsOf(t *testing.T, name string) []v1.Pod {
	t.Helper()
	list, err := client.CoreV1().Pods(testNS).List(context.Background(), metav1.ListOptions{LabelSelector: "app=" + name})
	if err != nil {
		t.Fatal(err)
	}
	var out []v1.Pod
	for _, p := range list.Items {
		if p.DeletionTimestamp == nil {
			out = append(out, p)
		}
	}
	return out
}

func appStatus(p *v1.Pod) *v1.ContainerStatus {
	for i := range p.Status.ContainerStatuses {
		if p.Status.ContainerStatuses[i].Name == "app" {
			return &p.Status.ContainerStatuses[i]
		}
	}
	return nil
}

func totalRestarts(pods []v1.Pod) (n int32) {
	for i := range pods {
		if cs := appStatus(&pods[i]); cs != nil {
			n += cs.RestartCount
		}
	}
	return n
}

// probedEventsFor lists probed's events with reason about the pods whose
// names start with prefix.
func probedEventsFor(t *testing.T, prefix, reason string) []v1.Event {
	t.Helper()
	list, err := client.CoreV1().Events(testNS).List(context.Background(), metav1.ListOptions{FieldSelector: "reason=" + reason})
	if err != nil {
		t.Fatal(err)
	}
	var out []v1.Event
	for _, e := range list.Items {
		if e.Source.Component == "probed" && strings.HasPrefix(e.InvolvedObject.Name, prefix) {
			out = append(out, e)
		}
	}
	return out
}

func eventsTotal(evs []v1.Event) (n int32) {
	for _, e := range evs {
		n += max(e.Count, 1)
	}
	return n
}

func pollT(t *testing.T, what string, timeout time.Duration, cond func() bool) {
	t.Helper()
	if err := wait.PollUntilContextTimeout(context.Background(), time.Second, timeout, true,
		func(context.Context) (bool, error) { return cond(), nil }); err != nil {
		t.Fatalf("timed out after %v waiting for %s", timeout, what)
	}
}

func livenessSuccesses(t *testing.T, p v1.Pod) float64 {
	return scrape(t, `prober_probe_total{container="app",namespace="`+testNS+`",pod="`+p.Name+`",pod_uid="`+string(p.UID)+`",probe_type="Liveness",result="successful"}`)
}

// livenessPassedOnAll waits until every pod has had a passing liveness probe
// after now.
func livenessPassedOnAll(t *testing.T, pods []v1.Pod) {
	t.Helper()
	for _, p := range pods {
		base := livenessSuccesses(t, p)
		pollT(t, "a passing liveness probe on "+p.Name, time.Minute, func() bool { return livenessSuccesses(t, p) > base })
	}
}

// TestRestartGuardWorkload: a ReplicaSet of 4 whose liveness fails on every
// pod at once. At most 2 are restarted (the guard allows a kill while no
// more than half are failing); the rest are paused with a RestartsPaused
// Warning event, the paused-workloads gauge and the deferral counter show it,
// and none is restarted again while the outage lasts. Once it clears the
// gauge drops, and a single pod failing alone is restarted: kills resumed.
func TestRestartGuardWorkload(t *testing.T) {
	const name, replicas = "guard", 4
	ctx := context.Background()
	outage := newSharedOutage(t, name)
	labels := map[string]string{"app": name}
	rs := &appsv1.ReplicaSet{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: testNS},
		Spec: appsv1.ReplicaSetSpec{
			Replicas: ptr(int32(replicas)),
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: outage.podTemplate(labels),
		},
	}
	if _, err := client.AppsV1().ReplicaSets(testNS).Create(ctx, rs, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = client.AppsV1().ReplicaSets(testNS).Delete(context.Background(), name, metav1.DeleteOptions{PropagationPolicy: ptr(metav1.DeletePropagationBackground)})
		_ = wait.PollUntilContextTimeout(context.Background(), time.Second, 2*time.Minute, true, func(context.Context) (bool, error) {
			list, err := client.CoreV1().Pods(testNS).List(context.Background(), metav1.ListOptions{LabelSelector: "app=" + name})
			return err == nil && len(list.Items) == 0, nil
		})
	})
	var pods []v1.Pod
	pollT(t, "4 replicas running", podStartTimeout, func() bool {
		pods = podsOf(t, name)
		running := 0
		for i := range pods {
			if cs := appStatus(&pods[i]); cs != nil && cs.State.Running != nil {
				running++
			}
		}
		return running == replicas
	})
	livenessPassedOnAll(t, pods)
	pausedBefore := scrape(t, "probed_restarts_paused_workloads")
	deferredBefore := scrape(t, `probed_restarts_deferred_total{reason="workload_guard"}`)

	outage.set("all", true)
	began := time.Now()
	want := "pods of ReplicaSet " + testNS + "/" + name + " on this node; pausing restarts"
	var paused []v1.Event
	pollT(t, "a RestartsPaused event", time.Minute, func() bool {
		paused = nil
		for _, e := range probedEventsFor(t, name+"-", "RestartsPaused") {
			if e.Type == warning && strings.Contains(e.Message, want) && strings.Contains(e.Message, "of 4 pods") {
				paused = append(paused, e)
			}
		}
		return len(paused) > 0
	})
	t.Logf("%v after the outage began: %s %s: %q", time.Since(began).Round(100*time.Millisecond), paused[0].InvolvedObject.Name, paused[0].Reason, paused[0].Message)
	if fp := paused[0].InvolvedObject.FieldPath; fp != "spec.containers{app}" {
		t.Errorf("RestartsPaused fieldPath %q", fp)
	}
	pollT(t, "the paused-workloads gauge", 30*time.Second, func() bool {
		return scrape(t, "probed_restarts_paused_workloads") >= pausedBefore+1
	})
	if d := scrape(t, `probed_restarts_deferred_total{reason="workload_guard"}`); d <= deferredBefore {
		t.Errorf("probed_restarts_deferred_total{reason=\"workload_guard\"} %v, want more than %v", d, deferredBefore)
	}
	// While every replica fails, 15 probe periods: no more than 2 kills
	// in all, and the restarted ones are not restarted again.
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		if k := eventsTotal(probedEventsFor(t, name+"-", "Killing")); k > 2 {
			t.Fatalf("%d kills during the outage; the guard allows at most 2 of 4", k)
		}
		time.Sleep(2 * time.Second)
	}
	kills := eventsTotal(probedEventsFor(t, name+"-", "Killing"))
	restarts := totalRestarts(podsOf(t, name))
	t.Logf("during a 30 s+ outage of all 4 replicas: %d kills, %d restarts, %d RestartsPaused events", kills, restarts, eventsTotal(paused))
	if restarts > 2 {
		t.Errorf("%d restarts during the outage, want at most 2", restarts)
	}

	outage.set("all", false)
	cleared := time.Now()
	pollT(t, "the paused-workloads gauge back down", time.Minute, func() bool {
		return scrape(t, "probed_restarts_paused_workloads") <= pausedBefore
	})
	t.Logf("paused gauge back to %v %v after the outage cleared", pausedBefore, time.Since(cleared).Round(100*time.Millisecond))
	pods = podsOf(t, name)
	livenessPassedOnAll(t, pods)

	// Kills resumed: one replica failing alone (1 of 4) is restarted.
	victim := pods[0]
	for _, p := range pods {
		if cs := appStatus(&p); cs != nil && cs.RestartCount == 0 {
			victim = p
			break
		}
	}
	before := appStatus(&victim).RestartCount
	killsBefore := eventsTotal(probedEventsFor(t, victim.Name, "Killing"))
	outage.set(victim.Name, true)
	pollT(t, "a Killing event for "+victim.Name, time.Minute, func() bool {
		return eventsTotal(probedEventsFor(t, victim.Name, "Killing")) > killsBefore
	})
	outage.set(victim.Name, false)
	pollT(t, "the lone failing replica restarted", 2*time.Minute, func() bool {
		p, err := client.CoreV1().Pods(testNS).Get(ctx, victim.Name, metav1.GetOptions{})
		cs := (*v1.ContainerStatus)(nil)
		if err == nil {
			cs = appStatus(p)
		}
		return cs != nil && cs.RestartCount == before+1
	})
	t.Logf("after the outage, a lone failing replica (%s) was restarted", victim.Name)
}

// TestRestartBudgetOnNode redeploys probed with --liveness-restart-budget=2
// (the tier runs it unlimited, see probedArgs) and fails 4 bare pods'
// liveness at once: 2 kills go through, the others are deferred with a
// RestartBudgetExceeded Warning event and the budget deferral counter. The
// DaemonSet's flags are restored afterwards.
func TestRestartBudgetOnNode(t *testing.T) {
	const name, n = "budget", 4
	ctx := context.Background()
	if err := nd.DeployProbed(ctx, probedImage, append(append([]string{}, probedArgs...), "--liveness-restart-budget=2")...); err != nil {
		t.Fatalf("redeploying probed with a budget of 2: %v", err)
	}
	t.Cleanup(func() {
		if err := nd.DeployProbed(context.Background(), probedImage, probedArgs...); err != nil {
			t.Errorf("restoring probed's flags: %v", err)
		}
	})
	outage := newSharedOutage(t, name)
	var pods []v1.Pod
	createBarePods(t, name, n, outage.podTemplate(map[string]string{"app": name}))
	pollT(t, "4 pods running", podStartTimeout, func() bool {
		pods = podsOf(t, name)
		running := 0
		for i := range pods {
			if cs := appStatus(&pods[i]); cs != nil && cs.State.Running != nil {
				running++
			}
		}
		return running == n
	})
	livenessPassedOnAll(t, pods)
	deferredBefore := scrape(t, `probed_restarts_deferred_total{reason="budget"}`)

	outage.set("all", true)
	began := time.Now()
	wantMsg := "the node's restart budget of 2 per minute is spent; restart of container app after its liveness probe failure deferred"
	pollT(t, "a RestartBudgetExceeded event", time.Minute, func() bool {
		for _, e := range probedEventsFor(t, name+"-", "RestartBudgetExceeded") {
			if e.Type == warning && e.Message == wantMsg {
				return true
			}
		}
		return false
	})
	t.Logf("RestartBudgetExceeded %v after the outage began", time.Since(began).Round(100*time.Millisecond))
	pollT(t, "the budget deferral counter", 30*time.Second, func() bool {
		return scrape(t, `probed_restarts_deferred_total{reason="budget"}`) > deferredBefore
	})
	// The bucket started full (2) when probed started and refills one token
	// per 30 s: within 25 s of the outage, at most 2 kills.
	for time.Since(began) < 25*time.Second {
		if k := eventsTotal(probedEventsFor(t, name+"-", "Killing")); k > 2 {
			t.Fatalf("%d kills within %v; the budget allows 2", k, time.Since(began).Round(time.Second))
		}
		time.Sleep(time.Second)
	}
	k := eventsTotal(probedEventsFor(t, name+"-", "Killing"))
	t.Logf("within 25 s of 4 simultaneous liveness failures: %d kills, deferred counter %v -> %v", k, deferredBefore,
		scrape(t, `probed_restarts_deferred_total{reason="budget"}`))
	if k < 1 {
		t.Errorf("no kill at all within 25 s; the budget should have let 2 through")
	}
	outage.set("all", false)
}
