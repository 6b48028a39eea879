//go:build runtime

package runtimetest

import (
	"context"
	"os"
	goruntime "runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"

	"github.com/probed-dev/probed/pkg/cri/connect"
	"github.com/probed-dev/probed/pkg/cri/decorator"
	"github.com/probed-dev/probed/pkg/prober"
	"github.com/probed-dev/probed/pkg/results"
	ctrd "github.com/probed-dev/probed/test/harness/containerd"
)

const (
	hostileConcurrent = 100
	hostileRounds     = 3
	// hostileRSSBound bounds the test process's peak VmRSS while 100
	// hostile probes run at once. Measured (docs/reliability/hostile.md):
	// 177 MiB under -race, which inflates memory several times; 2.5x that.
	hostileRSSBound = 448 << 20
	// hostileHeapBound bounds the Go heap in use (HeapInuse): measured
	// 16 MiB, 3x that.
	hostileHeapBound = 48 << 20
)

// TestHostileConcurrent runs 100 hostile probes at once, a mix of every
// network target and of exec probes through the exec cap, for a few rounds,
// and checks that every round ends within its bound, that the process's RSS
// and heap stay under their bounds, and that goroutines return to baseline.
func TestHostileConcurrent(t *testing.T) {
	h := need(t)
	c := newContainer(t, ctrd.ContainerSpec{Command: idleCommand})
	baseline := goruntime.NumGoroutine()
	t.Logf("before: VmRSS %d MiB", vmRSS()>>20)
	var peakRSS, peakHeap atomic.Int64

	t.Run("rounds", func(t *testing.T) {
		rt, err := connect.New(context.Background(), impls[0].opts(h))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = rt.Close() })
		p := prober.New(decorator.NewLimited(rt, decorator.DefaultMaxConcurrentExecs, nil), prober.Options{})
		ns := blackholeNetns(t)
		big, _ := bigBodyServer(t, 200)
		slow, slowBody := slowlorisServer(t), slowBodyServer(t)
		garbage, silentTLS := tlsGarbageServer(t, nil, 64<<10), tlsGarbageServer(t, []byte{0x16, 0x03, 0x03, 0x3f, 0xff}, 64)
		silent := silentServer(t)
		chain, loop := redirectChain(t, 20), redirectLoop(t)
		pod := loopbackPod
		blackhole := prober.Target{PodIP: blackholeAddr}
		execTarget := prober.Target{ContainerID: c.RuntimeID()}

		type job struct {
			spec   *v1.Probe
			target prober.Target
			ns     *os.File
		}
		mix := []job{
			{hostileHTTPSpec(v1.URISchemeHTTP, big.port), pod, nil},
			{hostileHTTPSpec(v1.URISchemeHTTP, slow.port), pod, nil},
			{hostileHTTPSpec(v1.URISchemeHTTP, slowBody.port), pod, nil},
			{hostileHTTPSpec(v1.URISchemeHTTPS, garbage.port), pod, nil},
			{hostileHTTPSpec(v1.URISchemeHTTPS, silentTLS.port), pod, nil},
			{hostileGRPCSpec(silent.port), pod, nil},
			{hostileTCPSpec(80), blackhole, ns},
			{hostileHTTPSpec(v1.URISchemeHTTP, chain[0]), pod, nil},
			{hostileHTTPSpec(v1.URISchemeHTTP, loop), pod, nil},
			{execSpec(time.Second, "yes", "hostile-load"), execTarget, nil},
		}

		stop := make(chan struct{})
		var sampling sync.WaitGroup
		sampling.Add(1)
		go func() {
			defer sampling.Done()
			var ms goruntime.MemStats
			for {
				select {
				case <-stop:
					return
				case <-time.After(50 * time.Millisecond):
				}
				goruntime.ReadMemStats(&ms)
				peakHeap.Store(max(peakHeap.Load(), int64(ms.HeapInuse)))
				peakRSS.Store(max(peakRSS.Load(), vmRSS()))
			}
		}()
		defer func() { close(stop); sampling.Wait() }()

		// Slow body retries three times; exec probes may queue behind the
		// cap for their whole timeout.
		bound := 3*hostileTimeout + execMargin
		for round := range hostileRounds {
			outs := make([]<-chan outcome, hostileConcurrent)
			for i := range outs {
				j := mix[i%len(mix)]
				outs[i] = startProbe(p, j.spec, j.target, j.ns)
			}
			deadline := time.After(bound)
			for i, ch := range outs {
				select {
				case o := <-ch:
					if len(o.out) > prober.MaxOutputBytes {
						t.Errorf("round %d probe %d: output of %d bytes", round, i, len(o.out))
					}
					if o.res != results.Failure && i%len(mix) != 0 {
						t.Errorf("round %d probe %d: %v", round, i, o)
					}
				case <-deadline:
					t.Fatalf("round %d: probe %d still running after %v", round, i, bound)
				}
			}
			t.Logf("round %d: peak RSS %d MiB, peak heap in use %d MiB", round, peakRSS.Load()>>20, peakHeap.Load()>>20)
		}
		killMatching(t, c.ID, "hostile-load")
	})

	t.Logf("%d hostile probes at once, %d rounds: peak VmRSS %d MiB (bound %d), peak HeapInuse %d MiB (bound %d)",
		hostileConcurrent, hostileRounds, peakRSS.Load()>>20, hostileRSSBound>>20, peakHeap.Load()>>20, hostileHeapBound>>20)
	if peakRSS.Load() > hostileRSSBound {
		t.Errorf("peak RSS %d MiB over the bound %d MiB", peakRSS.Load()>>20, hostileRSSBound>>20)
	}
	if peakHeap.Load() > hostileHeapBound {
		t.Errorf("peak heap %d MiB over the bound %d MiB", peakHeap.Load()>>20, hostileHeapBound>>20)
	}
	var now int
	poll(t, "goroutines back to baseline", 15*time.Second, func() bool {
		now = goruntime.NumGoroutine()
		return now <= baseline
	})
	t.Logf("goroutines: %d before, %d after", baseline, now)
}

// vmRSS is this process's resident set size, from /proc/self/status.
func vmRSS() int64 { return procStatus("self", "VmRSS") }
