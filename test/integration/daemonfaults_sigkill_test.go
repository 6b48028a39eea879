//go:build integration

package integration

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
)

// condRecorder watches a namespace's pods and records every transition of
// a per-pod state (say, probed's conditions), per pod, from a known
// starting state.
type condRecorder struct {
	state func(*v1.Pod) map[string]string
	mu    sync.Mutex
	last  map[string]map[string]string // pod -> key -> value
	flips map[string][]string          // pod -> "key: from->to"
}

// probedConds is the status of each of probed's conditions.
func probedConds(p *v1.Pod) map[string]string {
	out := map[string]string{}
	for _, c := range p.Status.Conditions {
		if strings.Contains(string(c.Type), "probed.io") {
			out[string(c.Type)] = string(c.Status)
		}
	}
	return out
}

// watchConds records the transitions of probed's conditions.
func (e *testEnv) watchConds(ctx context.Context) *condRecorder {
	return e.watchPodState(ctx, probedConds)
}

// watchPodState lists the namespace's pods as the baseline and records
// every change of state after it until ctx ends.
func (e *testEnv) watchPodState(ctx context.Context, state func(*v1.Pod) map[string]string) *condRecorder {
	e.t.Helper()
	list, err := client.CoreV1().Pods(e.ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		e.t.Fatal(err)
	}
	r := &condRecorder{state: state, last: map[string]map[string]string{}, flips: map[string][]string{}}
	for i := range list.Items {
		r.last[list.Items[i].Name] = state(&list.Items[i])
	}
	w, err := client.CoreV1().Pods(e.ns).Watch(ctx, metav1.ListOptions{ResourceVersion: list.ResourceVersion})
	if err != nil {
		e.t.Fatal(err)
	}
	go func() {
		defer w.Stop()
		for ev := range w.ResultChan() {
			if ev.Type == watch.Error {
				if ctx.Err() == nil {
					e.t.Errorf("watch error: %v", ev.Object)
				}
				return
			}
			p, ok := ev.Object.(*v1.Pod)
			if !ok || ev.Type != watch.Modified {
				continue
			}
			now := r.state(p)
			r.mu.Lock()
			prev := r.last[p.Name]
			for k, v := range now {
				if prev[k] != v {
					r.flips[p.Name] = append(r.flips[p.Name], fmt.Sprintf("%s: %q->%q", k, prev[k], v))
				}
			}
			for k, v := range prev {
				if _, ok := now[k]; !ok {
					r.flips[p.Name] = append(r.flips[p.Name], fmt.Sprintf("%s: %q removed", k, v))
				}
			}
			r.last[p.Name] = now
			r.mu.Unlock()
		}
	}()
	return r
}

func (r *condRecorder) transitions(pod string) []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.flips[pod]...)
}

// all is every pod's transitions.
func (r *condRecorder) all() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []string
	for pod, fl := range r.flips {
		for _, f := range fl {
			out = append(out, pod+": "+f)
		}
	}
	return out
}

// TestSIGKILLDuringStatusWrites: 20 pods, 10 of whose targets keep flipping
// so that status writes are in flight, while probed is SIGKILLed and
// restarted three times. Afterwards every condition matches its target's final health,
// and no condition of the 10 pods whose targets never changed ever moved.
func TestSIGKILLDuringStatusWrites(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ip := loopbackIP()
	const flippers, steady = 10, 10
	type podT struct {
		name   string
		target *httpTarget
		flips  bool
	}
	var pods []podT
	for i := 0; i < flippers+steady; i++ {
		flips := i < flippers
		healthy := i%2 == 0
		name := fmt.Sprintf("steady-%d", i)
		if flips {
			name = fmt.Sprintf("flip-%d", i)
		}
		tg := startHTTPTarget(t, ip, healthy)
		pod := e.createPod(name, mustJSON(probes{"app": {"readinessProbe": httpProbe(tg.Port, "/ready",
			map[string]any{"failureThreshold": 1})}}), true, container{name: "app"})
		e.runPod(pod, ip, time.Minute)
		pods = append(pods, podT{name, tg, flips})
	}
	want := func(tg *httpTarget) v1.ConditionStatus {
		if tg.healthy.Load() {
			return v1.ConditionTrue
		}
		return v1.ConditionFalse
	}
	converged := func() bool {
		for _, p := range pods {
			if !e.condIs(p.name, "ready.probed.io/app", want(p.target)) || !e.condIs(p.name, "probed.io/ready", want(p.target)) {
				return false
			}
		}
		return true
	}
	p := e.startProbed()
	eventually(t, "initial conditions", 30*time.Second, converged)

	ctx, cancel := context.WithCancel(e.ctx)
	defer cancel()
	rec := e.watchConds(ctx)

	// Flip the flippers every 1.2-2.6 s, each at its own pace (probes run
	// every second, so each state is seen), so writes are always flowing.
	flipCtx, stopFlipping := context.WithCancel(ctx)
	var wg sync.WaitGroup
	for i, pt := range pods {
		if !pt.flips {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			tick := time.NewTicker(time.Duration(1200+150*i) * time.Millisecond)
			defer tick.Stop()
			for {
				select {
				case <-flipCtx.Done():
					return
				case <-tick.C:
					pt.target.Set(!pt.target.healthy.Load())
				}
			}
		}()
	}
	writes := func() int {
		n := 0
		for _, pt := range pods {
			n += len(rec.transitions(pt.name))
		}
		return n
	}
	var restartedAt time.Time
	for round := 0; round < 3; round++ {
		// Kill only while writes are flowing.
		w0 := writes()
		eventually(t, "status writes flowing", 30*time.Second, func() bool { return writes() >= w0+10 })
		_ = p.Kill()
		t.Logf("round %d: SIGKILLed probed with %d condition transitions seen so far", round, writes())
		p = e.startProbed()
		restartedAt = time.Now()
	}
	// Every flipper's condition must move under the last probed: a target
	// can flip and flip back while probed is down, so earlier rounds alone
	// prove nothing for a given pod.
	marks := map[string]int{}
	for _, pt := range pods {
		marks[pt.name] = len(rec.transitions(pt.name))
	}
	eventually(t, "every flipper's condition moving after the last restart", 30*time.Second, func() bool {
		for _, pt := range pods {
			if pt.flips && len(rec.transitions(pt.name)) <= marks[pt.name] {
				return false
			}
		}
		return true
	})
	stopFlipping()
	wg.Wait()
	stopped := time.Now()
	eventually(t, "conditions match the targets' final health", 30*time.Second, converged)
	t.Logf("converged %v after the last flip (%v after the last restart)",
		time.Since(stopped).Round(10*time.Millisecond), time.Since(restartedAt).Round(10*time.Millisecond))
	// Hold: nothing drifts afterwards either.
	consistently(t, "converged conditions", 3*time.Second, converged)

	for _, pt := range pods {
		if tr := rec.transitions(pt.name); !pt.flips && len(tr) != 0 {
			t.Errorf("%s: its target never changed, yet its conditions moved: %v", pt.name, tr)
		}
	}
	select {
	case <-p.Done():
		t.Fatalf("probed exited: %v", p.ExitErr())
	default:
	}
}
