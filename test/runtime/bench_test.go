//go:build runtime

package runtimetest

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/probed-dev/probed/pkg/cri/connect"
	"github.com/probed-dev/probed/pkg/cri/decorator"
	ctrd "github.com/probed-dev/probed/test/harness/containerd"
)

// BenchmarkExec measures one exec of `true`, end to end, per implementation.
// Besides ns/op it reports the host CPU spent per exec by containerd, the
// shims and everything they reaped (runc, runc init, the command), and the
// CPU of this client process.
func BenchmarkExec(b *testing.B) {
	benchExec(b, 1)
}

// BenchmarkExecParallel runs execs from many goroutines through the default
// per-node cap, for throughput under contention.
func BenchmarkExecParallel(b *testing.B) {
	benchExec(b, decorator.DefaultMaxConcurrentExecs)
}

func benchExec(b *testing.B, slots int) {
	h := need(b)
	c := newContainer(b, ctrd.ContainerSpec{Command: idleCommand})
	for _, im := range impls {
		b.Run(im.name, func(b *testing.B) {
			ctx := context.Background()
			rt, err := connect.New(ctx, im.opts(h))
			if err != nil {
				b.Fatal(err)
			}
			defer rt.Close()
			// All in one container: its share is every slot, as before the
			// per-pod share, so the figures measure the runtime at slots in flight.
			l := decorator.NewLimitedWith(rt, decorator.LimitOptions{MaxConcurrent: slots, PerPod: slots, MaxHold: -1})
			exec := func() {
				if _, code, err := l.ExecInContainer(ctx, c.RuntimeID(), []string{"true"}, 10*time.Second); err != nil || code != 0 {
					b.Errorf("exec: %d %v", code, err)
				}
			}
			exec() // warm up: connection, first runc exec
			host0, self0 := hostCPU(h), selfCPU()
			b.ResetTimer()
			if slots == 1 {
				for i := 0; i < b.N; i++ {
					exec()
				}
			} else {
				b.SetParallelism(slots)
				b.RunParallel(func(pb *testing.PB) {
					for pb.Next() {
						exec()
					}
				})
			}
			b.StopTimer()
			host, self := hostCPU(h)-host0, selfCPU()-self0
			b.ReportMetric(float64(host.Microseconds())/1000/float64(b.N), "host-cpu-ms/op")
			b.ReportMetric(float64(self.Microseconds())/1000/float64(b.N), "client-cpu-ms/op")
		})
	}
}

// hostCPU sums user+system time, own and reaped children's, of containerd and
// of the shims serving it (found by our socket on their command line).
func hostCPU(h *ctrd.Containerd) time.Duration {
	pids := []int{h.PID()}
	entries, _ := os.ReadDir("/proc")
	needle := []byte("\x00" + h.Socket() + "\x00")
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == h.PID() {
			continue
		}
		cmdline, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err == nil && bytes.Contains(append(cmdline, 0), needle) {
			pids = append(pids, pid)
		}
	}
	var ticks int64
	for _, pid := range pids {
		b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
		if err != nil {
			continue
		}
		s := string(b)
		f := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
		// After the name: state(0) ... utime(11) stime(12) cutime(13) cstime(14).
		for _, i := range []int{11, 12, 13, 14} {
			v, _ := strconv.ParseInt(f[i], 10, 64)
			ticks += v
		}
	}
	return time.Duration(ticks) * time.Second / 100 // USER_HZ is 100 on Linux
}

func selfCPU() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
