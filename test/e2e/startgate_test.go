//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"
)

// The start gate admits the scenarios' pods to the node a few at a time,
// and only while the machine has CPU to spare. It promises that a scenario
// waiting at the gate has not created its pod yet and has not started its
// clock, so no check measures the wait; and that every pod is admitted in
// the end: a pressure that does not fall delays each admission by at most
// admitMaxWait.
//
// Why: on two cores, starting pods (runc, shims, CNI plugins, the kubelet)
// is what starves the node. With the ~70 pods created in the same second,
// both cores were busy for three minutes at a load average of 85, and 5 s
// exec probes and 1 s gRPC connects timed out. A fixed number of pods
// starting at once (6) lowered that to 30–45 here, and still left CI's
// slower machine at 40 with 97 % CPU pressure, where a 1 s exec liveness
// probe timed out three times. The pressure test adapts the pace of starts
// to the machine, whatever its speed.
var startGate = newGate(
	envInt("E2E_START_SLOTS", 6),
	envInt("E2E_START_PRESSURE", 50),
	"/proc/pressure/cpu",
)

const (
	// admitSpacing separates two admissions: avg10 is a 10 s average, so a
	// start shows in it only after a while.
	admitSpacing = time.Second
	// admitMaxWait bounds the wait for pressure to fall, per admission.
	admitMaxWait = 15 * time.Second
)

type gate struct {
	slots    chan struct{}
	pressure float64 // percent: admit while CPU pressure avg10 is below it
	psiPath  string

	mu        sync.Mutex // one admission at a time
	lastAdmit time.Time
}

func newGate(slots, pressure int, psiPath string) *gate {
	return &gate{slots: make(chan struct{}, slots), pressure: float64(pressure), psiPath: psiPath}
}

// admission says how a pod got through the gate.
type admission struct {
	waited   time.Duration
	pressure string // CPU pressure avg10 when admitted, or "" if unknown
	slowed   bool   // the wait for pressure to fall ran out
}

func (a admission) String() string {
	s := fmt.Sprintf("waited %v at the start gate", a.waited.Round(100*time.Millisecond))
	if a.pressure != "" {
		s += fmt.Sprintf(" (CPU pressure avg10 %s%% when admitted)", a.pressure)
	}
	if a.slowed {
		s += "; the pressure did not fall in time"
	}
	return s
}

// enter takes a start slot, then waits for the machine to have headroom.
// The caller gives the slot back with leave once its pod has started.
func (g *gate) enter(ctx context.Context) (admission, error) {
	began := time.Now()
	select {
	case g.slots <- struct{}{}:
	case <-ctx.Done():
		return admission{}, ctx.Err()
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	var a admission
	err := wait.PollUntilContextTimeout(ctx, 250*time.Millisecond, admitMaxWait, true, func(context.Context) (bool, error) {
		if time.Since(g.lastAdmit) < admitSpacing {
			return false, nil
		}
		p, ok := g.cpuPressure()
		a.pressure = ""
		if ok {
			a.pressure = strconv.FormatFloat(p, 'f', 1, 64)
		}
		return !ok || p < g.pressure, nil
	})
	if ctx.Err() != nil {
		<-g.slots
		return admission{}, ctx.Err()
	}
	a.slowed = err != nil
	g.lastAdmit = time.Now()
	a.waited = time.Since(began)
	return a, nil
}

func (g *gate) leave() { <-g.slots }

// cpuPressure reads "some avg10" from the kernel's pressure stall
// information: the share of the last ~10 s in which some runnable task
// waited for a CPU. ok is false where the kernel has no PSI.
func (g *gate) cpuPressure() (float64, bool) {
	b, err := os.ReadFile(g.psiPath)
	if err != nil {
		return 0, false
	}
	line, _, _ := strings.Cut(string(b), "\n")
	for _, f := range strings.Fields(line) {
		if v, ok := strings.CutPrefix(f, "avg10="); ok {
			p, err := strconv.ParseFloat(v, 64)
			return p, err == nil
		}
	}
	return 0, false
}
