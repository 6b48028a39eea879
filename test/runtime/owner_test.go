//go:build runtime

package runtimetest

import (
	"context"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/probed-dev/probed/pkg/cri"
	"github.com/probed-dev/probed/pkg/cri/decorator"
	"github.com/probed-dev/probed/pkg/kill"
	"github.com/probed-dev/probed/pkg/prober"
	"github.com/probed-dev/probed/pkg/probespec"
	"github.com/probed-dev/probed/pkg/results"
	"github.com/probed-dev/probed/pkg/worker"
	ctrd "github.com/probed-dev/probed/test/harness/containerd"
)

// ownedWorker runs a probe of container "app" of the harness pod c, whose
// status names containerID (c's own, or a spoofed one), in a real worker
// with the real RuntimeKiller, on rt as probed wires it; opts change its
// configuration. stop ends it and waits.
func ownedWorker(rt cri.Runtime, c *ctrd.Container, containerID string, pt probespec.ProbeType, probe *v1.Probe, opts ...func(*worker.Config, *eventLog)) (w *worker.Worker, events *eventLog, stop func()) {
	grace := int64(2)
	pods := &podSource{pod: &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: c.PodName, Namespace: c.PodNamespace, UID: types.UID(c.PodUID)},
		Spec: v1.PodSpec{RestartPolicy: v1.RestartPolicyAlways, TerminationGracePeriodSeconds: &grace,
			Containers: []v1.Container{{Name: c.Name}}},
		Status: v1.PodStatus{Phase: v1.PodRunning, PodIP: "127.0.0.1"},
	}}
	pods.run(containerID)
	events = &eventLog{}
	cfg := worker.Config{
		PodUID: types.UID(c.PodUID), PodNamespace: c.PodNamespace, PodName: c.PodName,
		Container: &v1.Container{Name: c.Name}, ProbeType: pt, Spec: probe,
		Prober:      prober.New(rt, prober.Options{}),
		Pods:        pods,
		Results:     results.NewManager(),
		Recorder:    events,
		Killer:      &kill.RuntimeKiller{Runtime: rt, Recorder: events},
		Started:     func(*v1.Pod, *v1.ContainerStatus) bool { return true },
		DaemonStart: time.Now().Add(-time.Hour),
	}
	for _, o := range opts {
		o(&cfg, events)
	}
	w = worker.New(cfg)
	ctx, cancel := context.WithCancel(context.Background())
	go w.Run(ctx)
	return w, events, func() { cancel(); <-w.Done() }
}

// closedPort is a loopback port nothing listens on.
func closedPort(t *testing.T) int {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	return port
}

// Issue 20: a pod whose status names another pod's container ID (whoever
// may write its status chose it) gets no exec into that container and no
// kill of it, on the real runtime with each client; the runtime's own
// labels say whose the container is. With its own container ID the same
// probes run.
func TestSpoofedContainerIDGetsNoExecAndNoKill(t *testing.T) {
	forEachImpl(t, func(t *testing.T, rt cri.Runtime) {
		h := need(t)
		victim := newContainer(t, ctrd.ContainerSpec{Name: "etcd", Command: idleCommand})
		tenant := newContainer(t, ctrd.ContainerSpec{Name: "app", Command: idleCommand})
		reg := prometheus.NewRegistry()
		m := decorator.NewMetrics(reg)
		verified, err := decorator.NewVerified(rt, m)
		if err != nil {
			t.Fatal(err)
		}
		l := decorator.NewLimited(verified, decorator.DefaultMaxConcurrentExecs, m)

		// The tenant's pod status names the victim's container: an exec
		// liveness probe that would leave a mark, and a TCP liveness probe
		// that fails and so asks for a kill.
		mark := &v1.Probe{
			ProbeHandler:  v1.ProbeHandler{Exec: &v1.ExecAction{Command: []string{"sh", "-c", "touch /tmp/pwned; exit 1"}}},
			PeriodSeconds: 1, TimeoutSeconds: 5, SuccessThreshold: 1, FailureThreshold: 1,
		}
		execW, execEvents, stop := ownedWorker(l, tenant, victim.RuntimeID(), probespec.Liveness, mark)
		defer stop()
		_, killEvents, stop := ownedWorker(l, tenant, victim.RuntimeID(), probespec.Liveness, &v1.Probe{
			ProbeHandler:  v1.ProbeHandler{TCPSocket: &v1.TCPSocketAction{Port: intstr.FromInt(closedPort(t))}},
			PeriodSeconds: 1, TimeoutSeconds: 1, SuccessThreshold: 1, FailureThreshold: 1,
		})
		defer stop()
		name := cri.RuntimeName(rt)
		refusals := func(op string) float64 {
			return counterValue(t, reg, "probed_runtime_owner_refusals_total", map[string]string{"op": op})
		}
		poll(t, "three refused execs and two refused kills", 30*time.Second, func() bool {
			return refusals("exec") >= 3 && refusals("stop") >= 2
		})

		ctx := context.Background()
		if out, code, err := h.Exec(ctx, victim.ID, "ls", "/tmp/pwned"); err != nil || code == 0 {
			t.Errorf("the spoofed exec probe ran in the victim's container: ls /tmp/pwned = %q %d %v", out, code, err)
		}
		if st, err := h.ContainerState(ctx, victim.ID); err != nil || st != runtimeapi.ContainerState_CONTAINER_RUNNING {
			t.Errorf("the victim's container: %v %v; want still running", st, err)
		}
		if got := counterValue(t, reg, "probed_runtime_exec_total", map[string]string{"runtime": name, "outcome": decorator.OutcomeSuccess}) +
			counterValue(t, reg, "probed_runtime_exec_total", map[string]string{"runtime": name, "outcome": decorator.OutcomeNonzeroExit}); got != 0 {
			t.Errorf("%v execs ran", got)
		}
		if !execEvents.has(`Warning Unhealthy app: Liveness probe errored and resulted in unknown state: container ID ` + victim.RuntimeID() + ` from the pod's status is not container "app" of this pod on the container runtime; probed refuses to exec into it`) {
			t.Errorf("no Unhealthy event for the refused exec: %v", execEvents.events)
		}
		if execEvents.has("Killing") || execW.Snapshot().LastResult != "" {
			t.Errorf("a refused exec counted as a result: %v, %+v", execEvents.events, execW.Snapshot())
		}
		if !killEvents.has(`Warning ContainerMismatch app: container ID ` + victim.RuntimeID() + ` from the pod's status is not container "app" of this pod on the container runtime; probed refuses to stop it`) {
			t.Errorf("no ContainerMismatch event for the refused kill: %v", killEvents.events)
		}
		if killEvents.has("Killing") {
			t.Errorf("a Killing event for a refused kill: %v", killEvents.events)
		}
		for _, e := range append(execEvents.all(), killEvents.all()...) {
			if strings.Contains(e, victim.PodName) || strings.Contains(e, "etcd") {
				t.Errorf("an event on the tenant's pod names the victim: %q", e)
			}
		}

		// The tenant's own container ID: the same exec runs there.
		own, _, stop := ownedWorker(l, tenant, tenant.RuntimeID(), probespec.Readiness, mark)
		defer stop()
		poll(t, "the probe run in the tenant's own container", 15*time.Second, func() bool {
			return own.Snapshot().LastResult == "failure"
		})
		if out, code, err := h.Exec(ctx, tenant.ID, "ls", "/tmp/pwned"); err != nil || code != 0 {
			t.Errorf("the tenant's own exec probe left no mark: %q %d %v", out, code, err)
		}
	})
}

func (l *eventLog) all() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]string(nil), l.events...)
}
