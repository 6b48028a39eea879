//go:build integration && footprint

package integration

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"

	"github.com/probed-dev/probed/test/harness/proc"
)

// TestFootprint110Pods measures one probed on a 110-pod node with a typical
// mix (every pod an httpGet readiness probe, one in five also a tcpSocket
// liveness probe, both every 10 s) on the real apiserver: process CPU over a
// steady minute, RSS and its parts, Go's memory statistics, and a heap
// profile (probed built with -tags footprint serves net/http/pprof on
// PROBED_PPROF_ADDR). Not in CI: a measurement, run by hand under the
// cluster lock (docs/benchmarks/ANALYSIS.md):
//
//	flock /work/cluster.lock go test -tags integration,footprint -run TestFootprint110Pods -v ./test/integration/
//
// FOOTPRINT_BIN measures another build (for example main's); FOOTPRINT_OUT
// names the directory for the JSON and the heap profile;
// FOOTPRINT_MEMPROFILERATE=N samples every N bytes allocated, from the first
// package initialiser on (GODEBUG=memprofilerate), for a heap profile fine
// enough to read by package (it costs CPU: measure CPU without it).
func TestFootprint110Pods(t *testing.T) {
	const pods, window = 110, time.Minute
	out := os.Getenv("FOOTPRINT_OUT")
	if out == "" {
		out = t.TempDir()
	}
	if err := os.MkdirAll(out, 0o755); err != nil {
		t.Fatal(err)
	}
	bin := os.Getenv("FOOTPRINT_BIN")
	if bin == "" {
		bin = proc.BuildTB(t, "./cmd/probed", proc.BuildOptions{Shipped: true, Tags: []string{"footprint"}})
	}
	probedBin = bin // this test runs alone: not parallel

	e := newEnv(t)
	ip := loopbackIP()
	tg := startHTTPTarget(t, ip, true)
	for i := range pods {
		ps := map[string]any{"readinessProbe": httpProbe(tg.Port, "/ready", map[string]any{"periodSeconds": 10})}
		if i%5 == 0 {
			ps["livenessProbe"] = map[string]any{"tcpSocket": map[string]any{"port": tg.Port}, "periodSeconds": 10}
		}
		e.runPod(e.createPod(fmt.Sprintf("fp-%d", i), mustJSON(probes{"app": ps}), true, container{name: "app"}), ip, time.Minute)
	}
	pprofAddr := freeAddr(t)
	t.Setenv("PROBED_PPROF_ADDR", pprofAddr)
	// As deploy/daemonset.yaml runs it; FOOTPRINT_GOGC measures another.
	gogc := "50"
	if g := os.Getenv("FOOTPRINT_GOGC"); g != "" {
		gogc = g
	}
	t.Setenv("GOGC", gogc)
	if rate := os.Getenv("FOOTPRINT_MEMPROFILERATE"); rate != "" {
		t.Setenv("GODEBUG", "memprofilerate="+rate)
	}
	p := e.startProbed("-v=0")
	for i := range pods {
		e.waitCond(fmt.Sprintf("fp-%d", i), "probed.io/ready", v1.ConditionTrue, 2*time.Minute)
	}
	time.Sleep(20 * time.Second) // past the start-up jitter and the first GCs
	pid := p.PID()
	c0, t0 := procCPU(t, pid), time.Now()
	time.Sleep(window)
	c1, t1 := procCPU(t, pid), time.Now()

	res := map[string]any{
		"pods": pods, "workers": pods + pods/5, "binary": bin,
		"cpuMillisPerSecond": (c1 - c0).Seconds() * 1000 / t1.Sub(t0).Seconds(),
		"status":             procFields(t, fmt.Sprintf("/proc/%d/status", pid), "VmRSS", "RssAnon", "RssFile", "VmHWM"),
		"smapsRollup":        procFields(t, fmt.Sprintf("/proc/%d/smaps_rollup", pid), "Rss", "Anonymous", "Private_Clean", "Shared_Clean"),
	}
	_, metrics := p.get("/metrics")
	goStats := map[string]float64{}
	for _, line := range strings.Split(metrics, "\n") {
		if strings.HasPrefix(line, "go_memstats_") || strings.HasPrefix(line, "go_goroutines") || strings.HasPrefix(line, "process_resident") {
			if f := strings.Fields(line); len(f) == 2 {
				v, _ := strconv.ParseFloat(f[1], 64)
				goStats[f[0]] = v
			}
		}
	}
	res["go"] = goStats
	resp, err := http.Get("http://" + pprofAddr + "/debug/pprof/heap?gc=1")
	if err != nil {
		t.Fatal(err)
	}
	prof, _ := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	if err := os.WriteFile(filepath.Join(out, "heap.pb.gz"), prof, 0o644); err != nil {
		t.Fatal(err)
	}
	b, _ := json.MarshalIndent(res, "", "  ")
	if err := os.WriteFile(filepath.Join(out, "footprint.json"), b, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("%s", b)
}

// procCPU is a process's user and system CPU time.
func procCPU(t *testing.T, pid int) time.Duration {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		t.Fatal(err)
	}
	f := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+2:]))
	utime, _ := strconv.ParseInt(f[11], 10, 64)
	stime, _ := strconv.ParseInt(f[12], 10, 64)
	return time.Duration(utime+stime) * time.Second / 100 // USER_HZ
}

// procFields reads "Name: value kB" lines of a /proc file, in KiB.
func procFields(t *testing.T, path string, names ...string) map[string]int64 {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]int64{}
	for _, line := range strings.Split(string(b), "\n") {
		k, v, ok := strings.Cut(line, ":")
		if !ok {
			continue
		}
		for _, n := range names {
			if k == n {
				f := strings.Fields(v)
				if len(f) > 0 {
					out[n], _ = strconv.ParseInt(f[0], 10, 64)
				}
			}
		}
	}
	return out
}
