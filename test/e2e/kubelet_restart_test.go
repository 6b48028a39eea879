//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/version"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apimachinery/pkg/watch"
)

// TestKubeletRestartBesideProbed is issue 22's KEP-4781 on the real node: the
// kubelet restarts (SIGTERM, then the same command line, as a service
// manager's restart does) beside a running probed, and the pods' containers
// keep running. From 1.35 the kubelet keeps Ready and Started of containers
// that kept running. Nothing may flip, not for a moment: neither probed's
// condition, nor the pod's Ready and ContainersReady, nor the containers'
// ready and started, of a pod whose probes probed runs and of one whose
// readiness probe the kubelet runs (the control that the kubelet keeps its
// own); probed writes nothing and does not restart. The window ends once
// both readiness probes have run three more times after the kubelet's first
// node status, so the kubelet has re-synced both pods and re-run its prober.
// With the kubelet's Pods API as probed's pod source, its socket goes away
// and comes back with the kubelet: probed's watch ends, and it watches the
// new kubelet (checkWatchedNewKubelet), with nothing flipped meanwhile.
func TestKubeletRestartBesideProbed(t *testing.T) {
	ctx := context.Background()
	node, err := client.CoreV1().Nodes().Get(ctx, nd.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if v, err := version.ParseGeneric(node.Status.NodeInfo.KubeletVersion); err != nil || v.LessThan(version.MajorMinor(1, 35)) {
		t.Skipf("kubelet %s: KEP-4781 (a restart keeps Ready) is from 1.35", node.Status.NodeInfo.KubeletVersion)
	}
	_, probedBefore := probedPod(t)

	const label = "e2e.probed.io/kubelet-restart"
	s := newSC(t, "kubelet-restart", regular)
	s.group = "parity"
	pod := s.newPod("app", shell("touch /tmp/healthy; exec sleep 1000000"), probes{
		Startup:   &v1.Probe{ProbeHandler: execHandler("cat", "/tmp/healthy"), PeriodSeconds: 1},
		Liveness:  &v1.Probe{ProbeHandler: execHandler("cat", "/tmp/healthy"), PeriodSeconds: 2},
		Readiness: &v1.Probe{ProbeHandler: execHandler("sh", "-c", "echo >>/tmp/ran"), PeriodSeconds: 1},
	})
	pod.Labels[label] = "yes"
	s.create(pod)

	control := &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "kubelet-restart-control", Namespace: testNS, Labels: map[string]string{label: "yes"}},
		Spec: v1.PodSpec{
			AutomountServiceAccountToken:  ptr(false),
			EnableServiceLinks:            ptr(false),
			TerminationGracePeriodSeconds: ptr(int64(1)),
			Containers: []v1.Container{{
				Name: "app", Image: imgBusybox, ImagePullPolicy: v1.PullNever,
				Command:        []string{"/bin/sh", "-c", "exec sleep 1000000"},
				ReadinessProbe: &v1.Probe{ProbeHandler: execHandler("sh", "-c", "echo >>/tmp/ran"), PeriodSeconds: 1},
				StartupProbe:   &v1.Probe{ProbeHandler: execHandler("true"), PeriodSeconds: 1},
			}},
		},
	}
	if _, err := client.CoreV1().Pods(testNS).Create(ctx, control, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = client.CoreV1().Pods(testNS).Delete(context.Background(), control.Name, metav1.DeleteOptions{GracePeriodSeconds: ptr(int64(0))})
	})

	selector := label + "=yes"
	var list *v1.PodList
	if err := wait.PollUntilContextTimeout(ctx, 500*time.Millisecond, podStartTimeout, true, func(ctx context.Context) (bool, error) {
		list, err = client.CoreV1().Pods(testNS).List(ctx, metav1.ListOptions{LabelSelector: selector})
		if err != nil || len(list.Items) != 2 {
			return false, nil
		}
		for i := range list.Items {
			if held(&list.Items[i]) != nil {
				return false, nil
			}
		}
		return true, nil
	}); err != nil {
		t.Fatalf("both pods ready, started and probed-ready: %v (%d pods)", err, len(list.Items))
	}
	// A 1.35+ kubelet treats a container that started within 10 s before
	// its own start as new (Ready and Started from scratch); past that it
	// keeps them. probed keeps its results either way.
	var youngest time.Time
	for i := range list.Items {
		for _, cs := range list.Items[i].Status.ContainerStatuses {
			if t := cs.State.Running.StartedAt.Time; t.After(youngest) {
				youngest = t
			}
		}
	}
	if err := wait.PollUntilContextTimeout(ctx, 250*time.Millisecond, time.Minute, true, func(context.Context) (bool, error) {
		return time.Since(youngest) > kubeletRestartGrace+2*time.Second, nil
	}); err != nil {
		t.Fatal(err)
	}
	if list, err = client.CoreV1().Pods(testNS).List(ctx, metav1.ListOptions{LabelSelector: selector}); err != nil {
		t.Fatal(err)
	}
	before := map[string]string{}
	for i := range list.Items {
		before[list.Items[i].Name] = marks(&list.Items[i])
	}
	writes := scrape(t, "probed_status_writes_total")
	// With the kubelet as probed's pod source, its socket goes with the
	// kubelet and comes back with it: probed's stream ends (an error by
	// gRPC code), and probed watches the new kubelet.
	watches := scrape(t, "probed_pod_source_watches_total")
	sourceErrors := scrape(t, "probed_pod_source_errors_total")

	// Every state of both pods from here on, so a flip and its undoing are
	// both seen, even within one second.
	w, err := client.CoreV1().Pods(testNS).Watch(ctx, metav1.ListOptions{LabelSelector: selector, ResourceVersion: list.ResourceVersion})
	if err != nil {
		t.Fatal(err)
	}
	var (
		mu      sync.Mutex
		flips   []string
		updates int
		done    = make(chan struct{})
	)
	go func() {
		defer close(done)
		for ev := range w.ResultChan() {
			p, ok := ev.Object.(*v1.Pod)
			if !ok {
				continue
			}
			mu.Lock()
			updates++
			if ev.Type != watch.Modified {
				flips = append(flips, fmt.Sprintf("%s %s", ev.Type, p.Name))
			} else if err := held(p); err != nil {
				flips = append(flips, fmt.Sprintf("%s: %v", p.Name, err))
			}
			mu.Unlock()
		}
	}()

	// Where the restarted kubelet's lines begin in its log.
	var kubeletLogFrom int64
	if st, err := os.Stat(filepath.Join(nd.RunDir, "kubelet.log")); err == nil {
		kubeletLogFrom = st.Size()
	}
	restarted := time.Now()
	if err := nd.RestartKubelet(); err != nil {
		t.Fatal(err)
	}
	s.note("kubelet restarted")
	if err := wait.PollUntilContextTimeout(ctx, 250*time.Millisecond, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		n, err := client.CoreV1().Nodes().Get(ctx, nd.Name, metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		for _, c := range n.Status.Conditions {
			if c.Type == v1.NodeReady && c.Status == v1.ConditionTrue && c.LastHeartbeatTime.Time.After(restarted.Truncate(time.Second)) {
				return true, nil
			}
		}
		return false, nil
	}); err != nil {
		t.Fatalf("no node status from the restarted kubelet: %v", err)
	}
	// kubectl exec goes through the new kubelet.
	ran := func(pod string) int {
		out, err := kubectl(ctx, "exec", "-n", testNS, pod, "-c", "app", "--", "wc", "-l", "/tmp/ran")
		if err != nil {
			return -1
		}
		n, _ := strconv.Atoi(strings.Fields(out + " x")[0])
		return n
	}
	for _, name := range []string{s.podName, control.Name} {
		var from, now int
		if err := wait.PollUntilContextTimeout(ctx, 500*time.Millisecond, time.Minute, true, func(context.Context) (bool, error) {
			if from <= 0 {
				from = ran(name)
				return false, nil
			}
			now = ran(name)
			return now >= from+3, nil
		}); err != nil {
			t.Fatalf("%s: its readiness probe did not run 3 more times after the restart (%d, then %d)", name, from, now)
		}
	}
	s.note("both readiness probes ran 3 times after the kubelet's first node status (%v after the restart)", time.Since(restarted).Round(100*time.Millisecond))
	if podSource == "kubelet" {
		checkWatchedNewKubelet(t, s, watches, sourceErrors, kubeletLogFrom)
	}

	after, err := client.CoreV1().Pods(testNS).List(ctx, metav1.ListOptions{LabelSelector: selector})
	if err != nil {
		t.Fatal(err)
	}
	w.Stop()
	<-done
	mu.Lock()
	defer mu.Unlock()
	for _, f := range flips {
		t.Errorf("during the kubelet restart: %s", f)
	}
	for i := range after.Items {
		p := &after.Items[i]
		if got := marks(p); got != before[p.Name] {
			t.Errorf("%s changed across the kubelet restart:\n before %s\n after  %s", p.Name, before[p.Name], got)
		}
	}
	if d := scrape(t, "probed_status_writes_total") - writes; d != 0 {
		t.Errorf("probed made %g status writes across the kubelet restart; want 0", d)
	}
	if _, after := probedPod(t); after.ContainerID != probedBefore.ContainerID || after.RestartCount != probedBefore.RestartCount {
		t.Errorf("probed restarted (%s x%d -> %s x%d)", probedBefore.ContainerID, probedBefore.RestartCount, after.ContainerID, after.RestartCount)
	}
	if len(flips) == 0 {
		s.note("%d pod updates watched, none flipped anything", updates)
	}
}

// checkWatchedNewKubelet: across the kubelet's restart, probed's stream of
// the old kubelet's Pods API ended (probed_pod_source_errors_total grew),
// probed opened more (probed_pod_source_watches_total grew: it reopens one
// every relist period anyway), and the new kubelet served one: its log,
// from logFrom on, has a WatchPods call.
func checkWatchedNewKubelet(t *testing.T, s *sc, watches, sourceErrors float64, logFrom int64) {
	t.Helper()
	var nowWatches, nowErrors float64
	var served int
	err := wait.PollUntilContextTimeout(context.Background(), time.Second, time.Minute, true, func(ctx context.Context) (bool, error) {
		nowWatches = scrape(t, "probed_pod_source_watches_total")
		nowErrors = scrape(t, "probed_pod_source_errors_total")
		served = newKubeletLogCount(logFrom, `"WatchPods called"`)
		return nowWatches > watches && nowErrors > sourceErrors && served > 0, nil
	})
	if err != nil {
		t.Errorf("across the kubelet restart: probed_pod_source_watches_total %g -> %g, probed_pod_source_errors_total %g -> %g, "+
			"WatchPods calls in the new kubelet's log %d; want all three to grow", watches, nowWatches, sourceErrors, nowErrors, served)
		return
	}
	s.note("probed's stream of the old kubelet ended (errors %g -> %g: %q) and it watched the new one (watches %g -> %g; the new kubelet logged %d WatchPods calls)",
		sourceErrors, nowErrors, metricLines(t, "probed_pod_source_errors_total"), watches, nowWatches, served)
}

// newKubeletLogCount counts the lines of the kubelet's log, from offset
// from on, that contain s.
func newKubeletLogCount(from int64, s string) int {
	f, err := os.Open(filepath.Join(nd.RunDir, "kubelet.log"))
	if err != nil {
		return 0
	}
	defer f.Close()
	if _, err := f.Seek(from, io.SeekStart); err != nil {
		return 0
	}
	b, err := io.ReadAll(f)
	if err != nil {
		return 0
	}
	return strings.Count(string(b), s)
}

// kubeletRestartGrace is how long before a 1.35+ kubelet's start a container
// must have started for the kubelet to keep its Ready and Started
// (pkg/kubelet/prober's restart grace).
const kubeletRestartGrace = 10 * time.Second

// watched is whether a condition is one the restart must not touch: Ready,
// ContainersReady, probed's conditions and its gate.
func watched(t v1.PodConditionType) bool {
	return t == v1.PodReady || t == v1.ContainersReady || strings.Contains(string(t), "probed.io/")
}

// held says what of a ready pod's state does not hold: Ready,
// ContainersReady and probed's conditions (and gate) True, every container
// running, ready and started.
func held(p *v1.Pod) error {
	for _, c := range p.Status.Conditions {
		if watched(c.Type) && c.Status != v1.ConditionTrue {
			return fmt.Errorf("condition %s %s (%s: %s)", c.Type, c.Status, c.Reason, c.Message)
		}
	}
	if condStatus(p, string(v1.PodReady)) != v1.ConditionTrue {
		return fmt.Errorf("no Ready condition")
	}
	if len(p.Status.ContainerStatuses) == 0 {
		return fmt.Errorf("no container status")
	}
	for _, cs := range p.Status.ContainerStatuses {
		if cs.State.Running == nil || !cs.Ready || cs.Started == nil || !*cs.Started {
			return fmt.Errorf("container %s: running %t, ready %t, started %v", cs.Name, cs.State.Running != nil, cs.Ready, cs.Started)
		}
	}
	return nil
}

// marks is what must not change across the restart: the status and last
// transition of Ready, ContainersReady and probed's conditions, each
// container's ID and restart count.
func marks(p *v1.Pod) string {
	var b strings.Builder
	for _, c := range p.Status.Conditions {
		if watched(c.Type) {
			fmt.Fprintf(&b, "%s=%s@%s ", c.Type, c.Status, c.LastTransitionTime.UTC().Format(time.RFC3339))
		}
	}
	for _, cs := range p.Status.ContainerStatuses {
		fmt.Fprintf(&b, "%s:%s#%d ", cs.Name, cs.ContainerID, cs.RestartCount)
	}
	return b.String()
}
