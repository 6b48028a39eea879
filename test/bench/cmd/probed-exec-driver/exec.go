package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"strconv"
	"strings"
	"time"

	v1 "k8s.io/api/core/v1"

	"github.com/probed-dev/probed/pkg/cri"
	"github.com/probed-dev/probed/pkg/cri/connect"
	"github.com/probed-dev/probed/pkg/cri/decorator"
	"github.com/probed-dev/probed/pkg/prober"
	"github.com/probed-dev/probed/pkg/probespec"
	"github.com/probed-dev/probed/pkg/results"
	"github.com/probed-dev/probed/test/bench/benchkit"
	ctrd "github.com/probed-dev/probed/test/harness/containerd"
)

// runExec starts a private containerd with test/harness/containerd, runs one
// idle busybox container, and drives `true` exec probes through probed's
// Prober over the pkg/cri runtimes for containerd (each behind the per-node
// cap, as in probed) at each rate, rotating their order per repetition:
// containerd-cri (probed's default), the native client, and CRI, the
// kubelet's path.
func runExec(args []string) (any, error) {
	fs := flag.NewFlagSet("exec", flag.ContinueOnError)
	repo := fs.String("repo", ".", "repository root (for .cache/images)")
	ratesF := fs.String("rates", "1,5,20", "execs per second")
	dursF := fs.String("durs", "10s,6s,5s", "run length per rate")
	reps := fs.Int("reps", 3, "repetitions")
	cpu := fs.Int("pin-cpu", -1, "pin this process to this CPU once containerd runs (-1: no)")
	cpuProfile := fs.String("cpuprofile", "", "write a CPU profile of the native client's runs at the last rate of the first repetition")
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	var rates []float64
	var durs []time.Duration
	for _, r := range strings.Split(*ratesF, ",") {
		v, err := strconv.ParseFloat(r, 64)
		if err != nil {
			return nil, err
		}
		rates = append(rates, v)
	}
	for _, d := range strings.Split(*dursF, ",") {
		v, err := time.ParseDuration(d)
		if err != nil {
			return nil, err
		}
		durs = append(durs, v)
	}
	if len(durs) != len(rates) {
		return nil, errors.New("-rates and -durs differ in length")
	}

	res := &benchkit.ExecResult{Runs: []benchkit.ExecRun{}}
	imageDir := filepath.Join(*repo, ".cache", "images")
	for _, img := range []string{"busybox", "pause"} {
		if _, err := os.Stat(filepath.Join(imageDir, img+".tar")); err != nil {
			res.Note = fmt.Sprintf("skipped: image %s missing (run hack/build-images.sh): %v", img, err)
			return res, nil
		}
	}
	ctx := context.Background()
	sctx, cancel := context.WithTimeout(ctx, 90*time.Second)
	h, err := ctrd.Start(sctx, ctrd.Options{ImageDir: imageDir, Images: []string{"busybox", "pause"}, StartTimeout: 60 * time.Second})
	cancel()
	if err != nil {
		res.Note = "skipped: containerd could not start: " + err.Error()
		return res, nil
	}
	defer func() {
		if err := h.Stop(); err != nil {
			fmt.Fprintln(os.Stderr, "exec: stop containerd:", err)
		}
	}()
	vctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	res.Containerd, _ = h.Version(vctx)
	cancel()
	cctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	c, err := h.RunContainer(cctx, ctrd.ContainerSpec{Command: []string{"sh", "-c", `trap "exit 0" TERM; sleep 100000 & wait`}})
	cancel()
	if err != nil {
		res.Note = "skipped: could not run a container: " + err.Error()
		return res, nil
	}

	// Only now pin ourselves: containerd and its shims must not inherit it.
	if *cpu >= 0 {
		if out, err := exec.Command("taskset", "-a", "-cp", strconv.Itoa(*cpu), strconv.Itoa(os.Getpid())).CombinedOutput(); err != nil {
			fmt.Fprintf(os.Stderr, "exec: taskset: %v: %s\n", err, out)
		}
		runtime.GOMAXPROCS(1)
	}

	type impl struct {
		name string
		p    *prober.Prober
		rt   cri.Runtime
	}
	var impls []impl
	for _, o := range []cri.Options{
		{Endpoint: h.Endpoint(), Type: cri.TypeContainerdCRI},
		{Endpoint: h.Endpoint(), Type: cri.TypeNative, FIFODir: h.FIFODir()},
		{Endpoint: h.Endpoint(), Type: cri.TypeCRI},
	} {
		rt, err := connect.New(ctx, o)
		if err != nil {
			return nil, fmt.Errorf("runtime %s: %w", o.Type, err)
		}
		defer rt.Close()
		l := decorator.NewLimited(rt, decorator.DefaultMaxConcurrentExecs, nil)
		impls = append(impls, impl{name: o.Type, p: prober.New(l, prober.Options{}), rt: rt})
	}
	spec := &v1.Probe{
		ProbeHandler:   v1.ProbeHandler{Exec: &v1.ExecAction{Command: []string{"true"}}},
		TimeoutSeconds: 1, PeriodSeconds: 10, SuccessThreshold: 1, FailureThreshold: 3,
	}
	target := prober.Target{PodIP: "127.0.0.1", ContainerID: c.RuntimeID()}
	probeWith := func(p *prober.Prober) benchkit.Probe {
		return func(ctx context.Context) error {
			r, out, err := p.Probe(ctx, probespec.Liveness, spec, target, noEvents{})
			if err != nil {
				return err
			}
			if r != results.Success {
				return fmt.Errorf("exec probe %v: %s", r, out)
			}
			return nil
		}
	}
	for _, im := range impls { // warm up: connections, first exec
		for range 3 {
			if err := probeWith(im.p)(ctx); err != nil {
				return nil, fmt.Errorf("warm-up %s: %w", im.name, err)
			}
		}
	}
	time.Sleep(time.Second)
	for rep := range *reps {
		for ri, rate := range rates {
			// Each repetition starts with the next runtime, so none is always first.
			k := rep % len(impls)
			order := append(append([]impl{}, impls[k:]...), impls[:k]...)
			for _, im := range order {
				profile := *cpuProfile != "" && rep == 0 && ri == len(rates)-1 && im.name == cri.TypeNative
				if profile {
					if err := startCPUProfile(*cpuProfile); err != nil {
						return nil, err
					}
				}
				host0, self0 := hostCPU(h), selfCPU()
				lat, nerr, _ := benchkit.OpenLoop(ctx, probeWith(im.p), rate, durs[ri], true)
				// The CRI plugin finishes an exec asynchronously; give it a moment
				// so its CPU lands in this window, not the next.
				time.Sleep(500 * time.Millisecond)
				host, self := hostCPU(h)-host0, selfCPU()-self0
				if profile {
					pprof.StopCPUProfile()
				}
				n := float64(len(lat)) + float64(nerr)
				run := benchkit.ExecRun{Impl: im.name, Rep: rep, Rate: rate, DurS: durs[ri].Seconds(), Errors: nerr, Lat: benchkit.Summarize(lat)}
				if n > 0 {
					run.HostCPUmsPerExec = float64(host.Microseconds()) / 1e3 / n
					run.SelfCPUmsPerExec = float64(self.Microseconds()) / 1e3 / n
				}
				res.Runs = append(res.Runs, run)
				fmt.Fprintf(os.Stderr, "exec rep %d %s %g/s: p50 %.1fms p99 %.1fms host %.1fms/exec self %.2fms/exec errors %d\n",
					rep, im.name, rate, run.Lat.P50US/1e3, run.Lat.P99US/1e3, run.HostCPUmsPerExec, run.SelfCPUmsPerExec, nerr)
				time.Sleep(500 * time.Millisecond)
			}
		}
	}
	rctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	_ = h.RemovePod(rctx, c.PodSandboxID)
	cancel()
	res.Available = true
	return res, nil
}

// hostCPU sums user+system time, own and reaped children's, of containerd
// and of the shims serving it (found by its socket on their command line).
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
	u, s := benchkit.CPU()
	return u + s
}

func startCPUProfile(path string) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	return pprof.StartCPUProfile(f) // the file is closed at exit
}
