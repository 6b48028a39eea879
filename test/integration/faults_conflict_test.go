//go:build integration

package integration

import (
	"context"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"
)

// untilStopped runs fn in n goroutines, each in a loop, until stop is called.
func untilStopped(n int, fn func(ctx context.Context)) (stop func()) {
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ctx.Err() == nil {
				fn(ctx)
			}
		}()
	}
	return func() { cancel(); wg.Wait() }
}

// TestFaultStatusConflicts: in container-status mode probed writes with the
// resourceVersion it read. Another writer read-modify-writes the status of
// every pod as fast as it can for 12 s (an unrelated condition), so probed's
// writes conflict over and over while targets flip. The other writer's
// changes must survive, and probed must end with the right values.
func TestFaultStatusConflicts(t *testing.T) {
	t.Parallel()
	r := newFaultRig(t, "container-status")
	r.start("")
	stopKubelet := r.runKubelet()
	stopFlips := r.flipEvery(2 * time.Second)
	// The other writer counts its writes in its condition's message: with
	// optimistic concurrency on both sides, the count on the server must
	// equal its successful writes, whatever probed did in between.
	var wrote [faultReadyPods]atomic.Int64
	var next atomic.Int64
	stopNoise := untilStopped(faultReadyPods, func(ctx context.Context) {
		i := int(next.Add(1)-1) % faultReadyPods // one writer per pod
		// Requests are not cancelled by stop: a write cancelled in flight
		// may land without the writer knowing, and break the count.
		req := context.Background()
		for ctx.Err() == nil {
			p, err := client.CoreV1().Pods(r.e.ns).Get(req, faultPodName(i), metav1.GetOptions{})
			if err != nil {
				continue
			}
			n := int64(0)
			if c := condition(p, "example.com/noise"); c != nil {
				n, _ = strconv.ParseInt(c.Message, 10, 64)
			}
			setCondition(p, v1.PodCondition{Type: "example.com/noise", Status: v1.ConditionTrue, Reason: "Noise",
				Message: strconv.FormatInt(n+1, 10), LastTransitionTime: metav1.Now()})
			if _, err := client.CoreV1().Pods(r.e.ns).UpdateStatus(req, p, metav1.UpdateOptions{}); err == nil {
				wrote[i].Add(1)
			}
		}
	})
	time.Sleep(12 * time.Second) // the fault's length
	stopFlips()
	stopNoise()
	ended := time.Now()
	stopKubelet()
	r.converged("status-conflicts", ended)
	r.checkKills("status-conflicts", ended)
	conflicts := r.statusWrites("conflict")
	t.Logf("probed's status writes that conflicted: %d", conflicts)
	if conflicts <= 0 {
		t.Error("probed saw no conflict; the other writer did not race it")
	}
	for i := range wrote {
		c := condition(r.e.pod(faultPodName(i)), "example.com/noise")
		if c == nil || c.Message != strconv.FormatInt(wrote[i].Load(), 10) {
			t.Errorf("%s: the other writer's count is %v, want %d: a write was lost", faultPodName(i), c, wrote[i].Load())
		}
	}
	r.checkHealthy("status-conflicts")
}

// TestFaultConditionOverwrite: in conditions mode another field manager
// force-applies the opposite of probed's conditions on every pod every
// 300 ms for 10 s while targets flip. probed re-applies on its next change
// or, without one, on the heartbeat (--status-resync=5s in this tier), so it
// ends with the right values and owns them again.
func TestFaultConditionOverwrite(t *testing.T) {
	t.Parallel()
	r := newFaultRig(t, "conditions")
	r.start("")
	stopKubelet := r.runKubelet()
	stopFlips := r.flipEvery(2 * time.Second)
	overwrites := 0
	stopIntruder := untilStopped(1, func(ctx context.Context) {
		for i, tg := range r.ready {
			wrong := boolCondition(!tg.healthy.Load())
			st := corev1ac.PodStatus().WithConditions(
				corev1ac.PodCondition().WithType("ready.probed.io/app").WithStatus(wrong).WithReason("Intruder").WithLastTransitionTime(metav1.Now()),
				corev1ac.PodCondition().WithType("probed.io/ready").WithStatus(wrong).WithReason("Intruder").WithLastTransitionTime(metav1.Now()),
			)
			_, err := client.CoreV1().Pods(r.e.ns).ApplyStatus(ctx, corev1ac.Pod(faultPodName(i), r.e.ns).WithStatus(st),
				metav1.ApplyOptions{FieldManager: "intruder", Force: true})
			if err == nil {
				overwrites++
			}
		}
		select {
		case <-ctx.Done():
		case <-time.After(300 * time.Millisecond): // pace the fault
		}
	})
	time.Sleep(10 * time.Second) // the fault's length
	stopFlips()
	stopIntruder()
	ended := time.Now()
	stopKubelet()
	if overwrites == 0 {
		t.Fatal("the intruder overwrote nothing")
	}
	r.converged("condition-overwrite", ended)
	r.checkKills("condition-overwrite", ended)
	// probed's own reasons are back. (The intruder may still co-own a
	// status it applied with the value probed applies now: SSA shares
	// ownership of equal values, and Force only takes over differing ones.)
	for i := range r.ready {
		p := r.e.pod(faultPodName(i))
		for _, ct := range []string{"ready.probed.io/app", "probed.io/ready"} {
			if c := condition(p, ct); c == nil || c.Reason == "Intruder" {
				t.Errorf("%s: condition %s is %v; want probed's", p.Name, ct, c)
			}
		}
	}
	t.Logf("intruder overwrites: %d", overwrites)
	r.checkHealthy("condition-overwrite")
}

// setCondition replaces or adds c in p's conditions.
func setCondition(p *v1.Pod, c v1.PodCondition) {
	for i := range p.Status.Conditions {
		if p.Status.Conditions[i].Type == c.Type {
			p.Status.Conditions[i] = c
			return
		}
	}
	p.Status.Conditions = append(p.Status.Conditions, c)
}
