// Package decorator holds the Runtimes that wrap another cri.Runtime:
// Verified refuses calls on a container that is not the caller's, Limited
// caps and shares the node's exec slots (and joins identical execs), and
// Health tells /readyz whether the runtime answers. cmd/probed stacks them
// as Limited(Verified(implementation)).
package decorator

import (
	"context"
	"fmt"
	"time"

	"github.com/probed-dev/probed/pkg/cri"
	"k8s.io/utils/clock"
)

// DefaultMaxConcurrentExecs is the suggested per-node cap on execs in flight.
//
// Measured on 2 cores with containerd 1.6 (test/runtime benchmarks): an exec
// of `true` costs about 21 ms of host CPU (containerd, shim, runc, runc init)
// and 25-35 ms of wall time, serial or 10 at a time alike: beyond a handful
// in flight, more concurrency buys no throughput on a small node, only CPU
// taken from the workloads and queueing inside containerd. Ten slots still
// give about 300 execs/s, against the ~11/s that 110 pods with one 10 s exec
// probe each need, so steady state never queues. The cost of a cap is that
// probes hung until their timeout hold slots: watch
// probed_runtime_exec_queue_wait_seconds and raise it on nodes with many
// long-timeout exec probes.
const DefaultMaxConcurrentExecs = 10

// DefaultMaxConcurrentExecsPerPod is the suggested share of one pod: a pod
// with hung exec probes keeps at most this many of the node's slots, so
// every other pod's execs still find one.
const DefaultMaxConcurrentExecsPerPod = 2

// ExecsInFlightPerShare is how many times its share of slots one pod may
// have execs running, slots given up after the hold included: a pod whose
// hung execs gave their slots up cannot start more than this, so it cannot
// multiply its load on the runtime or its answers in probed's memory
// (4 with the default share of 2).
const ExecsInFlightPerShare = 2

// DefaultExecSlotMaxHold is the suggested longest an exec keeps its slot
// while others wait. An exec costs its CPU (about 20 ms) at its start; one
// still running after half a second is waiting on something, not using
// the node, and a probe with the default 1 s timeout waiting behind it
// still runs in time.
const DefaultExecSlotMaxHold = 500 * time.Millisecond

// LimitOptions configure a Limited.
type LimitOptions struct {
	// MaxConcurrent caps execs holding a slot on the node;
	// DefaultMaxConcurrentExecs when < 1.
	MaxConcurrent int
	// PerPod caps one pod's execs holding a slot;
	// DefaultMaxConcurrentExecsPerPod when < 1, MaxConcurrent when above it.
	// ExecsInFlightPerShare times it caps the pod's execs running, slots
	// given up included.
	PerPod int
	// MaxHold is how long an exec keeps its slot while others wait, then
	// runs on without it; DefaultExecSlotMaxHold when 0, never when < 0.
	MaxHold time.Duration
	// Metrics may be nil.
	Metrics *Metrics
	// Clock defaults to the real clock.
	Clock clock.WithDelayedExecution
}

// Limited wraps a Runtime with the node's exec slots, shared fairly
// between pods (see execSlots), and records the runtime metrics. Stops are
// never queued: a liveness kill must not wait behind probes.
//
// The pod of an exec is the Owner in its context (WithOwner), or its
// container ID when it has none.
type Limited struct {
	rt    cri.Runtime
	name  string
	slots *execSlots
	clock clock.WithDelayedExecution
	m     *Metrics
	share *sharedRuns // nil: every exec runs
}

var _ cri.Runtime = (*Limited)(nil)

// NewLimited caps rt at maxConcurrent execs in flight (DefaultMaxConcurrentExecs
// when < 1), with the default per-pod share and hold. m may be nil.
func NewLimited(rt cri.Runtime, maxConcurrent int, m *Metrics) *Limited {
	return NewLimitedWith(rt, LimitOptions{MaxConcurrent: maxConcurrent, Metrics: m})
}

// NewLimitedWith wraps rt as o says.
func NewLimitedWith(rt cri.Runtime, o LimitOptions) *Limited {
	if o.MaxConcurrent < 1 {
		o.MaxConcurrent = DefaultMaxConcurrentExecs
	}
	if o.PerPod < 1 {
		o.PerPod = DefaultMaxConcurrentExecsPerPod
	}
	if o.MaxHold == 0 {
		o.MaxHold = DefaultExecSlotMaxHold
	}
	if o.Clock == nil {
		o.Clock = clock.RealClock{}
	}
	return &Limited{
		rt:    rt,
		name:  cri.RuntimeName(rt),
		slots: newExecSlots(o.MaxConcurrent, o.PerPod, ExecsInFlightPerShare*min(o.PerPod, o.MaxConcurrent), o.MaxHold, o.Clock, o.Metrics.observeSlotYield),
		clock: o.Clock,
		m:     o.Metrics,
	}
}

// ShareIdenticalExecs makes an exec join an identical one (same container,
// same command) already executing, instead of running again; see
// sharedRuns for what a caller then gets. Call it before the first exec.
func (l *Limited) ShareIdenticalExecs(c clock.Clock) {
	l.share = newSharedRuns(c)
}

// Uncapped is the wrapped runtime, for execs that are part of a kill (a
// preStop hook): like stops, they must not wait behind probes for a slot.
func (l *Limited) Uncapped() cri.Runtime { return l.rt }

// CheckOwner asks the wrapped runtime whether the container is the
// caller's, when it checks that (Verified); nil otherwise.
func (l *Limited) CheckOwner(ctx context.Context, containerID string) error {
	if c, ok := l.rt.(interface {
		CheckOwner(context.Context, string) error
	}); ok {
		return c.CheckOwner(ctx, containerID)
	}
	return nil
}

// Name is the wrapped runtime's name.
func (l *Limited) Name() string { return l.name }

// ExecInContainer waits for a slot, at most timeout, then runs the exec with
// the whole timeout, as the kubelet would have run it straight away. A
// probe whose timeout runs out in the queue gets a *SlotTimeoutError: the
// command never ran, and the wait says nothing about the container. If ctx
// ends first, ctx's error. A slot given up after the hold limit does not
// end the exec.
func (l *Limited) ExecInContainer(ctx context.Context, containerID string, cmd []string, timeout time.Duration) ([]byte, int, error) {
	if l.share == nil {
		return l.exec(ctx, containerID, cmd, timeout)
	}
	// A joiner gets the run's output without reaching the runtime: it must
	// be the container's owner as much as the run's leader had to be.
	if c, ok := l.rt.(interface {
		CheckExec(context.Context, string) error
	}); ok {
		if err := c.CheckExec(ctx, containerID); err != nil {
			return nil, -1, err
		}
	}
	key := runKey(containerID, cmd)
	for {
		r := l.share.joinable(key, timeout)
		if r == nil {
			break
		}
		out, code, err, ok := l.share.wait(ctx, r, containerID, timeout)
		if ok {
			l.m.observeShared()
			return out, code, err
		}
	}
	return l.exec(ctx, containerID, cmd, timeout)
}

// exec is one exec of its own: a slot, then the runtime.
func (l *Limited) exec(ctx context.Context, containerID string, cmd []string, timeout time.Duration) ([]byte, int, error) {
	start := l.clock.Now()
	slot, ok := l.slots.acquire(ctx, execPod(ctx, containerID), timeout)
	l.m.observeQueueWait(l.clock.Since(start))
	if !ok {
		if ctx.Err() != nil {
			l.m.observeExec(l.name, OutcomeError, 0, false)
			return nil, -1, fmt.Errorf("exec in container %s: waiting for an exec slot: %w", containerID, ctx.Err())
		}
		l.m.observeExec(l.name, OutcomeQueueTimeout, 0, false)
		return nil, -1, &cri.SlotTimeoutError{ContainerID: containerID, Waited: timeout}
	}
	defer slot.release()

	l.m.addInFlight(1)
	defer l.m.addInFlight(-1)
	var run *sharedRun
	if l.share != nil {
		run = l.share.begin(runKey(containerID, cmd), timeout)
	}
	execStart := time.Now()
	out, code, err := l.rt.ExecInContainer(ctx, containerID, cmd, timeout)
	l.m.observeExec(l.name, execOutcome(code, err), time.Since(execStart), true)
	if run != nil {
		l.share.finish(ctx, runKey(containerID, cmd), run, out, code, err)
	}
	return out, code, err
}

// execPod names the pod an exec counts against: its Owner's UID, or, for
// a caller that gives none, the container.
func execPod(ctx context.Context, containerID string) string {
	if o, ok := cri.OwnerFrom(ctx); ok && o.PodUID != "" {
		return o.PodUID
	}
	return containerID
}

// StopContainer passes through, recording metrics.
func (l *Limited) StopContainer(ctx context.Context, containerID string, grace time.Duration) error {
	start := time.Now()
	err := l.rt.StopContainer(ctx, containerID, grace)
	l.m.observeStop(l.name, err, time.Since(start))
	return err
}

// Ready passes through.
func (l *Limited) Ready(ctx context.Context) error { return l.rt.Ready(ctx) }

// Close closes the wrapped runtime.
func (l *Limited) Close() error { return l.rt.Close() }
