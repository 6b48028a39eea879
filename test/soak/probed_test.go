//go:build soak

package soak

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/probed-dev/probed/test/harness/proc"
)

// probedProc is the running daemon under test.
type probedProc struct {
	*proc.Daemon
	addr string
}

func startProbed(t *testing.T, node string, extra ...string) *probedProc {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &probedProc{addr: ln.Addr().String()}
	_ = ln.Close()
	args := append([]string{
		"--kubeconfig=" + cp.KubeconfigPath,
		"--node-name=" + node,
		"--metrics-bind-address=" + p.addr,
		// Plain HTTP on loopback: the soak measures probing, and its
		// figures stay comparable with runs before /metrics needed TLS.
		"--metrics-insecure-serving",
		"--runtime-type=none",
		"--probe-host-policy=kubelet",
		"-v=0",
	}, extra...)
	p.Daemon = proc.StartDaemon(t, "probed", probedBin, args, proc.DaemonOptions{CleanExit: true})
	eventually(t, "probed /readyz", time.Minute, func() bool {
		code, _ := p.get("/readyz")
		return code == http.StatusOK
	})
	return p
}

func (p *probedProc) alive() bool {
	done, _ := p.Exited()
	return !done
}

func (p *probedProc) get(path string) (int, string) {
	c := http.Client{Timeout: 20 * time.Second}
	resp, err := c.Get("http://" + p.addr + path)
	if err != nil {
		return 0, err.Error()
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// procSample is what /proc says about probed at one moment.
type procSample struct {
	At       time.Time `json:"-"`
	Elapsed  float64   `json:"t"` // seconds since the soak started
	RSSKiB   int64     `json:"rssKiB"`
	CPUTicks int64     `json:"-"`
	FDs      int       `json:"fds"`
}

func (p *probedProc) procSample() (procSample, error) {
	pid := p.PID()
	s := procSample{At: time.Now()}
	status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return s, err
	}
	for _, line := range strings.Split(string(status), "\n") {
		if rest, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			s.RSSKiB, _ = strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
		}
	}
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return s, err
	}
	// Fields after the parenthesised command; utime and stime are the 14th
	// and 15th fields of the whole line.
	f := strings.Fields(string(stat[strings.LastIndexByte(string(stat), ')')+1:]))
	utime, _ := strconv.ParseInt(f[11], 10, 64)
	stime, _ := strconv.ParseInt(f[12], 10, 64)
	s.CPUTicks = utime + stime
	fds, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
	if err != nil {
		return s, err
	}
	s.FDs = len(fds)
	return s, nil
}

// metricsSample is what probed's /metrics says at one moment.
type metricsSample struct {
	Elapsed    float64 `json:"t"`
	Series     int     `json:"series"`
	PodSeries  int     `json:"podSeries"` // series with a pod label
	Workers    int     `json:"workers"`
	Goroutines int     `json:"goroutines"`
	HeapInuse  int64   `json:"heapInuseBytes"`
	Kills      int     `json:"kills"`
	// Writes is probed_status_writes_total by outcome.
	Writes map[string]int `json:"statusWrites,omitempty"`
}

func (p *probedProc) metrics() (metricsSample, error) {
	var m metricsSample
	code, body := p.get("/metrics")
	if code != http.StatusOK {
		return m, fmt.Errorf("/metrics: %d %.200s", code, body)
	}
	sc := bufio.NewScanner(strings.NewReader(body))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if line == "" || line[0] == '#' {
			continue
		}
		m.Series++
		if strings.Contains(line, `pod="`) {
			m.PodSeries++
		}
		name, val := line, ""
		if i := strings.LastIndexByte(line, ' '); i > 0 {
			name, val = line[:i], line[i+1:]
		}
		v, _ := strconv.ParseFloat(val, 64)
		switch {
		case strings.HasPrefix(name, "probed_workers{"):
			m.Workers += int(v)
		case name == "go_goroutines":
			m.Goroutines = int(v)
		case name == "go_memstats_heap_inuse_bytes":
			m.HeapInuse = int64(v)
		case strings.HasPrefix(name, "probed_container_kills_total{"):
			m.Kills += int(v)
		case strings.HasPrefix(name, `probed_status_writes_total{outcome="`):
			if m.Writes == nil {
				m.Writes = map[string]int{}
			}
			m.Writes[strings.TrimSuffix(strings.TrimPrefix(name, `probed_status_writes_total{outcome="`), `"}`)] = int(v)
		}
	}
	return m, sc.Err()
}

// seriesNames is the set of series (name and labels) on /metrics.
func (p *probedProc) seriesNames() map[string]bool {
	_, body := p.get("/metrics")
	out := map[string]bool{}
	for _, line := range strings.Split(body, "\n") {
		if line == "" || line[0] == '#' {
			continue
		}
		if i := strings.LastIndexByte(line, ' '); i > 0 {
			out[line[:i]] = true
		}
	}
	return out
}
