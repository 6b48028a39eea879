//go:build linux

package worker

import (
	"context"
	"fmt"
	"net"
	"runtime"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/probed-dev/probed/pkg/prober"
	"github.com/probed-dev/probed/pkg/probespec"
	"github.com/probed-dev/probed/pkg/results"
)

// BenchmarkIdleWorkers runs real workers (New, Run) as on a node: 110 pods
// with three probes each (readiness and liveness of one container, readiness
// of a second), and 1,000 workers the same way. Every probe passes, every
// period 1 s, and the workers start as after a restart of probed (spread
// over a period by the start-up jitter). The probe is a no-op ("noop"), or
// the real prober's TCP probe of a listener on loopback ("tcp"), whose
// stack depth is a real probe's. It reports, over a window after every
// worker is on its ticker:
//
//   - cpu-ms/s: the process's CPU per second of probing;
//
//   - cpu-ns/tick: the same per probe;
//
//   - B/worker: live heap and goroutine stacks per worker, after a GC;
//
//   - allocs/tick: heap allocations per probe, the whole process.
//
//     go test -run '^$' -bench 'IdleWorkers' -benchtime 1x -count 3 ./pkg/worker/
//
// It uses only the package's exported API and the test fakes, so that the
// same file measures an older tree in the same run (benchConfig adapts it);
// docs/benchmarks/ANALYSIS.md has the figures.
func BenchmarkIdleWorkers(b *testing.B) {
	for _, probe := range []string{"noop", "tcp"} {
		for _, n := range []int{330, 1000} {
			b.Run(fmt.Sprintf("probe=%s/workers=%d", probe, n), func(b *testing.B) {
				for b.Loop() {
					idleWorkers(b, n, probe == "tcp")
				}
			})
		}
	}
}

// benchConfig, if set, adapts each worker's Config (an older tree's shared
// scheduler).
var benchConfig func(*Config)

// countingProber counts its calls and passes them to next, or passes.
type countingProber struct {
	n    *atomic.Int64
	next Prober
}

func (p countingProber) Probe(ctx context.Context, t probespec.ProbeType, spec *v1.Probe, target prober.Target, events prober.EventSink) (results.Result, string, error) {
	p.n.Add(1)
	if p.next != nil {
		return p.next.Probe(ctx, t, spec, target, events)
	}
	return results.Success, "", nil
}

// loopbackListener accepts and closes connections until the benchmark ends.
func loopbackListener(b *testing.B) int32 {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { l.Close() })
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			c.Close()
		}
	}()
	return int32(l.Addr().(*net.TCPAddr).Port)
}

func idleWorkers(b *testing.B, n int, tcp bool) {
	const period, window = time.Second, 3 * time.Second
	pods := &fakePods{}
	var calls atomic.Int64
	// As the manager has them: liveness results in a cache that reports
	// nothing, readiness results queued for the status writer (nothing
	// drains them here: after each container's first result, a steady
	// probe queues nothing more).
	byType := map[probespec.ProbeType]results.Manager{probespec.Readiness: results.NewManager(), probespec.Liveness: results.NewCache()}
	metrics := NewMetrics(prometheus.NewRegistry())
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	port, probe := int32(8080), countingProber{n: &calls}
	if tcp {
		port, probe.next = loopbackListener(b), prober.New(nil, prober.Options{})
	}
	spec := &v1.Probe{ProbeHandler: v1.ProbeHandler{TCPSocket: &v1.TCPSocketAction{Port: intstr.FromInt32(port)}},
		TimeoutSeconds: 1, PeriodSeconds: int32(period / time.Second), SuccessThreshold: 1, FailureThreshold: 3}
	var pod *v1.Pod
	before := memInUse()
	ws := make([]*Worker, 0, n)
	for i := range n {
		if i%3 == 0 {
			pod = benchPod(i / 3)
			pods.set(pod)
		}
		container, pt := &pod.Spec.Containers[0], probespec.Readiness
		switch i % 3 {
		case 1:
			pt = probespec.Liveness
		case 2:
			container = &pod.Spec.Containers[1]
		}
		cfg := Config{
			PodUID: pod.UID, PodNamespace: pod.Namespace, PodName: pod.Name,
			Container: container, ProbeType: pt, Spec: spec,
			Prober: probe, Pods: pods, Results: byType[pt],
			DaemonStart: time.Now(), Metrics: metrics,
		}
		if benchConfig != nil {
			benchConfig(&cfg)
		}
		w := New(cfg)
		ws = append(ws, w)
		go w.Run(ctx)
	}
	time.Sleep(period + 100*time.Millisecond) // every worker on its ticker
	perWorker := float64(memInUse()-before) / float64(n)
	var m0, m1 runtime.MemStats
	runtime.ReadMemStats(&m0)
	t0, c0 := calls.Load(), cpuTime()
	time.Sleep(window)
	t1, c1 := calls.Load(), cpuTime()
	runtime.ReadMemStats(&m1)
	for _, w := range ws {
		w.Stop()
	}
	for _, w := range ws {
		<-w.Done()
	}
	ticks := float64(t1 - t0)
	b.ReportMetric(float64(c1-c0)/window.Seconds()/1e6, "cpu-ms/s")
	b.ReportMetric(float64(c1-c0)/ticks, "cpu-ns/tick")
	b.ReportMetric(perWorker, "B/worker")
	b.ReportMetric(float64(m1.Mallocs-m0.Mallocs)/ticks, "allocs/tick")
}

// benchPod is a running pod whose two containers started an hour ago.
func benchPod(i int) *v1.Pod {
	started := true
	running := v1.ContainerState{Running: &v1.ContainerStateRunning{StartedAt: metav1.NewTime(time.Now().Add(-time.Hour))}}
	return &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("pod-%d", i), Namespace: "bench", UID: types.UID(fmt.Sprintf("uid-%08d", i))},
		Spec:       v1.PodSpec{Containers: []v1.Container{{Name: "app"}, {Name: "sidecar"}}},
		Status: v1.PodStatus{
			Phase: v1.PodRunning, PodIP: "127.0.0.1", PodIPs: []v1.PodIP{{IP: "127.0.0.1"}},
			ContainerStatuses: []v1.ContainerStatus{
				{Name: "app", Ready: true, Started: &started, ContainerID: fmt.Sprintf("containerd://%063x1", i), State: running},
				{Name: "sidecar", Ready: true, Started: &started, ContainerID: fmt.Sprintf("containerd://%063x2", i), State: running},
			},
		},
	}
}

// scaleWorkers is BenchmarkSeries50k's worker count:
//
//	go test -run '^$' -bench 'Series50k' -benchtime 1x ./pkg/worker/
const scaleWorkers = 50_000

// BenchmarkSeries50k: each worker's prober_probe_total and
// prober_probe_duration_seconds series, as the hand-rolled series in
// metrics_series.go or as client_golang CounterVec and HistogramVec
// children (with the same labels and buckets). Reports memory per worker
// and the cost of counting one result.
func BenchmarkSeries50k(b *testing.B) {
	for _, impl := range []string{"series", "client_golang"} {
		b.Run(impl, func(b *testing.B) {
			before := memInUse()
			var observe func(i int)
			var keep any
			switch impl {
			case "series":
				m := NewMetrics(prometheus.NewRegistry())
				ss := make([]series, scaleWorkers)
				for i := range ss {
					ss[i] = newSeries(probespec.Readiness, "app", fmt.Sprintf("pod-%d", i), "ns", fmt.Sprintf("uid-%d", i))
					m.observeProbe(&ss[i], results.Success, 0.001)
				}
				observe = func(i int) { m.observeProbe(&ss[i%scaleWorkers], results.Success, 0.002) }
				keep = ss
			default:
				reg := prometheus.NewRegistry()
				total := prometheus.NewCounterVec(prometheus.CounterOpts{Name: "prober_probe_total", Help: "h"},
					[]string{"probe_type", "container", "pod", "namespace", "pod_uid", "result"})
				dur := prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "prober_probe_duration_seconds", Help: "h"},
					[]string{"probe_type", "container", "pod", "namespace"})
				reg.MustRegister(total, dur)
				type child struct {
					c prometheus.Counter
					o prometheus.Observer
				}
				cs := make([]child, scaleWorkers)
				for i := range cs {
					pod := fmt.Sprintf("pod-%d", i)
					cs[i] = child{total.WithLabelValues("Readiness", "app", pod, "ns", fmt.Sprintf("uid-%d", i), "successful"),
						dur.WithLabelValues("Readiness", "app", pod, "ns")}
					cs[i].c.Inc()
					cs[i].o.Observe(0.001)
				}
				observe = func(i int) { c := &cs[i%scaleWorkers]; c.c.Inc(); c.o.Observe(0.002) }
				keep = reg
			}
			perWorker := float64(memInUse()-before) / scaleWorkers
			i := 0
			for b.Loop() {
				observe(i)
				i++
			}
			b.ReportMetric(perWorker, "B/worker")
			runtime.KeepAlive(keep)
		})
	}
}

// memInUse is the live heap and the goroutine stacks, after a collection.
func memInUse() int64 {
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return int64(ms.HeapAlloc + ms.StackInuse)
}

// cpuTime is the process's user and system CPU time in nanoseconds.
func cpuTime() int64 {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return ru.Utime.Nano() + ru.Stime.Nano()
}
