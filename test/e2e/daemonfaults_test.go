//go:build e2e

package e2e

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
)

// probedPod returns probed's DaemonSet pod on the node and its probed container's status.
func probedPod(t *testing.T) (*v1.Pod, *v1.ContainerStatus) {
	t.Helper()
	ctx := context.Background()
	name, err := nd.ProbedPodName(ctx)
	if err != nil {
		t.Fatal(err)
	}
	p, err := client.CoreV1().Pods(nd.ProbedNamespace()).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for i := range p.Status.ContainerStatuses {
		if p.Status.ContainerStatuses[i].Name == "probed" {
			return p, &p.Status.ContainerStatuses[i]
		}
	}
	t.Fatalf("pod %s has no probed container status", name)
	return nil, nil
}

// probedPID finds the host PID of the process named probed in the container
// whose runtime ID is containerID: the process must be in that container's
// cgroup, so nothing else on the host can match.
func probedPID(t *testing.T, containerID string) int {
	t.Helper()
	id := strings.TrimPrefix(containerID, "containerd://")
	if id == containerID || len(id) < 12 {
		t.Fatalf("unexpected container ID %q", containerID)
	}
	dirs, err := filepath.Glob("/proc/[0-9]*")
	if err != nil {
		t.Fatal(err)
	}
	var pids []int
	for _, d := range dirs {
		cg, err := os.ReadFile(filepath.Join(d, "cgroup"))
		if err != nil || !strings.Contains(string(cg), id) {
			continue
		}
		comm, err := os.ReadFile(filepath.Join(d, "comm"))
		if err != nil || strings.TrimSpace(string(comm)) != "probed" {
			continue
		}
		pid, _ := strconv.Atoi(filepath.Base(d))
		pids = append(pids, pid)
	}
	if len(pids) != 1 {
		t.Fatalf("processes named probed in container %s: %v, want exactly one", id, pids)
	}
	return pids[0]
}

// replaceProbedPod deletes probed's pod and waits for the DaemonSet's new one
// to be Ready, so the tier's later check that probed never restarted is about
// the scenarios, not about this test's kill.
func replaceProbedPod(t *testing.T) {
	ctx := context.Background()
	old, _ := probedPod(t)
	if err := client.CoreV1().Pods(old.Namespace).Delete(ctx, old.Name, metav1.DeleteOptions{}); err != nil {
		t.Errorf("deleting probed's pod: %v", err)
		return
	}
	err := wait.PollUntilContextTimeout(ctx, time.Second, 3*time.Minute, true, func(ctx context.Context) (bool, error) {
		list, err := client.CoreV1().Pods(old.Namespace).List(ctx, metav1.ListOptions{LabelSelector: "app.kubernetes.io/name=probed"})
		if err != nil {
			return false, nil
		}
		for _, p := range list.Items {
			if p.UID != old.UID && p.DeletionTimestamp == nil && isReady(&p) {
				return true, nil
			}
		}
		return false, nil
	})
	if err != nil {
		t.Errorf("no new Ready probed pod: %v", err)
	}
}

// TestSIGKILLDuringLivenessStop: probed is SIGKILLed while it stops a
// container whose process survives SIGTERM (grace 30 s). probed's native
// containerd client holds the grace timer itself, so the SIGKILL that would
// end the grace dies with it. Defined outcome: the kubelet restarts probed;
// the new probed finds the same container instance still running and still
// failing, stops it once more (a second Killing event, a full grace period,
// then SIGKILL), and the kubelet restarts the container exactly once: its
// restart count ends at +1, its last exit is 137, and it is not stopped again.
func TestSIGKILLDuringLivenessStop(t *testing.T) {
	const name = "stopkill"
	ctx := context.Background()
	outage := newSharedOutage(t, name)
	tmpl := outage.podTemplate(map[string]string{"app": name})
	pod := &v1.Pod{ObjectMeta: tmpl.ObjectMeta, Spec: tmpl.Spec}
	pod.Name, pod.Namespace = name, testNS
	pod.Spec.TerminationGracePeriodSeconds = ptr(int64(30))
	// SIGTERM does not end it; its handler leaves a mark on the host, so the
	// test knows the stop's grace period has begun.
	pod.Spec.Containers[0].Command = []string{"/bin/sh", "-c",
		`trap 'touch "/shared/term-$POD_NAME"' TERM; while true; do sleep 1 & wait; done`}
	if _, err := client.CoreV1().Pods(testNS).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = client.CoreV1().Pods(testNS).Delete(context.Background(), name, metav1.DeleteOptions{GracePeriodSeconds: ptr(int64(0))})
	})
	var pods []v1.Pod
	pollT(t, "the pod running", podStartTimeout, func() bool {
		pods = podsOf(t, name)
		return len(pods) == 1 && appStatus(&pods[0]) != nil && appStatus(&pods[0]).State.Running != nil
	})
	livenessPassedOnAll(t, pods)

	_, before := probedPod(t)
	pid := probedPID(t, before.ContainerID)
	t.Cleanup(func() { replaceProbedPod(t) })

	outage.set(name, true)
	kills := func() int32 { return eventsTotal(probedEventsFor(t, name, "Killing")) }
	pollT(t, "the first Killing event", time.Minute, func() bool { return kills() >= 1 })
	firstKill := time.Now()
	termMark := filepath.Join(outage.dir, "term-"+name)
	pollT(t, "the container to get SIGTERM", 30*time.Second, func() bool { _, err := os.Stat(termMark); return err == nil })
	if err := os.Remove(termMark); err != nil {
		t.Fatal(err)
	}
	// Mid-grace: SIGTERM was delivered and did not end the container.
	if p := podsOf(t, name); len(p) != 1 || appStatus(&p[0]).State.Running == nil || appStatus(&p[0]).RestartCount != 0 {
		t.Fatalf("container not running mid-grace: %s", summarize(&p[0]))
	}
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatalf("SIGKILL probed (pid %d): %v", pid, err)
	}
	t.Logf("SIGKILLed probed (host pid %d) %v after the Killing event, with the container's SIGTERM delivered", pid, time.Since(firstKill).Round(100*time.Millisecond))

	pollT(t, "probed restarted by the kubelet and Ready", 2*time.Minute, func() bool {
		_, cs := probedPod(t)
		return cs.RestartCount == before.RestartCount+1 && cs.Ready
	})
	t.Logf("probed back and Ready %v after the first Killing event", time.Since(firstKill).Round(100*time.Millisecond))

	pollT(t, "a second Killing event from the restarted probed", 2*time.Minute, func() bool { return kills() >= 2 })
	secondKill := time.Now()
	// The new container must pass, so only the interrupted stop is redone.
	outage.set(name, false)
	var p *v1.Pod
	pollT(t, "the container restarted once", 3*time.Minute, func() bool {
		ps := podsOf(t, name)
		if len(ps) != 1 {
			return false
		}
		p = &ps[0]
		cs := appStatus(p)
		if cs.RestartCount > 1 {
			t.Fatalf("restart count %d: restarted more than once", cs.RestartCount)
		}
		return cs.RestartCount == 1 && cs.State.Running != nil
	})
	restarted := time.Now()
	if _, err := os.Stat(termMark); err != nil {
		t.Errorf("the restarted probed's stop sent no SIGTERM before SIGKILL: %v", err)
	}
	cs := appStatus(p)
	if lt := cs.LastTerminationState.Terminated; lt == nil || lt.ExitCode != 137 {
		t.Errorf("last termination %+v, want exit code 137 (SIGKILL after the grace period)", cs.LastTerminationState)
	}
	t.Logf("first Killing -> second Killing %v; second Killing -> restarted %v (grace 30 s)",
		secondKill.Sub(firstKill).Round(100*time.Millisecond), restarted.Sub(secondKill).Round(100*time.Millisecond))
	// No third stop: the new container passes.
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) {
		if k := kills(); k != 2 {
			t.Fatalf("%d Killing events, want 2 (one per probed instance)", k)
		}
		ps := podsOf(t, name)
		if len(ps) == 1 && appStatus(&ps[0]).RestartCount != 1 {
			t.Fatalf("restart count %d after the fault, want 1", appStatus(&ps[0]).RestartCount)
		}
		time.Sleep(2 * time.Second)
	}
}
