//go:build scale

package apiload

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"

	"k8s.io/client-go/kubernetes"
)

// Counters is one scrape of the apiserver's /metrics, reduced to the series
// the figures need, keyed readably:
//
//	req VERB resource[/subresource]   apiserver_request_total, summed over codes
//	                                  (pods, events, nodes, leases)
//	code VERB leases CODE             the same for leases, by response code
//	fs <flow schema>                  apiserver_flowcontrol_dispatched_requests_total
//	watchev <Kind>                    apiserver_watch_events_total
//	watchbytes <Kind>                 apiserver_watch_events_sizes_sum
//	watches <resource>                apiserver_longrunning_requests{verb="WATCH"} (a gauge)
//	lat APPLY pods/status (sum|count) apiserver_request_duration_seconds, probed's condition writes
//	lat PATCH pods/status (sum|count) the same, for the kubelet's status patches
type Counters map[string]float64

// gauges are not deltas: a difference of two readings means nothing.
func isGauge(key string) bool { return strings.HasPrefix(key, "watches ") }

// Scrape reads the apiserver's /metrics through c (an admin client).
func Scrape(ctx context.Context, c kubernetes.Interface) (Counters, error) {
	rctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	body, err := c.CoreV1().RESTClient().Get().AbsPath("/metrics").DoRaw(rctx)
	if err != nil {
		return nil, fmt.Errorf("apiserver /metrics: %w", err)
	}
	out := Counters{}
	sc := bufio.NewScanner(strings.NewReader(string(body)))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if line == "" || line[0] == '#' {
			continue
		}
		name, labels, v, ok := parseSample(line)
		if !ok {
			continue
		}
		switch name {
		case "apiserver_request_total":
			if r := labels["resource"]; r == "pods" || r == "events" || r == "nodes" || r == "leases" {
				if s := labels["subresource"]; s != "" {
					r += "/" + s
				}
				if labels["group"] == "events.k8s.io" {
					r += ".events.k8s.io"
				}
				out["req "+labels["verb"]+" "+r] += v
				if r == "leases" {
					out["code "+labels["verb"]+" leases "+labels["code"]] += v
				}
			}
		case "apiserver_flowcontrol_dispatched_requests_total":
			if strings.HasPrefix(labels["flow_schema"], "scale-") {
				out["fs "+labels["flow_schema"]] += v
			}
		case "apiserver_watch_events_total":
			out["watchev "+labels["kind"]] += v
		case "apiserver_watch_events_sizes_sum":
			out["watchbytes "+labels["kind"]] += v
		case "apiserver_longrunning_requests":
			if labels["verb"] == "WATCH" && labels["resource"] == "pods" {
				out["watches pods"] += v
			}
		case "apiserver_request_duration_seconds_sum", "apiserver_request_duration_seconds_count":
			// APPLY is probed's condition write; PATCH the kubelet's.
			if verb := labels["verb"]; (verb == "APPLY" || verb == "PATCH") && labels["resource"] == "pods" && labels["subresource"] == "status" {
				out["lat "+verb+" pods/status "+strings.TrimPrefix(name, "apiserver_request_duration_seconds_")] += v
			}
		}
	}
	return out, sc.Err()
}

// parseSample splits `name{a="b",c="d"} 1.5` (no escaped quotes in the
// labels we read).
func parseSample(line string) (string, map[string]string, float64, bool) {
	i := strings.LastIndexByte(line, ' ')
	if i < 0 {
		return "", nil, 0, false
	}
	v, err := strconv.ParseFloat(line[i+1:], 64)
	if err != nil {
		return "", nil, 0, false
	}
	series := line[:i]
	name, rest, hasLabels := strings.Cut(series, "{")
	labels := map[string]string{}
	if hasLabels {
		for _, kv := range strings.Split(strings.TrimSuffix(rest, "}"), ",") {
			k, val, ok := strings.Cut(kv, "=")
			if ok {
				labels[k] = strings.Trim(val, `"`)
			}
		}
	}
	return name, labels, v, true
}

// Sub is c - base per key. A counter lower than its base was reset by an
// apiserver restart; its whole value is then the delta.
func (c Counters) Sub(base Counters) Counters {
	d := Counters{}
	for k, v := range c {
		switch b := base[k]; {
		case isGauge(k):
			d[k] = v
		case v >= b:
			d[k] = v - b
		default:
			d[k] = v
		}
	}
	return d
}

// FS is the requests of identity in request class.
func (c Counters) FS(identity, class string) float64 { return c["fs "+FlowSchemaName(identity, class)] }

// Writes is what an identity wrote: pod status and events.
func (c Counters) Writes(identity string) float64 {
	return c.FS(identity, "status-write") + c.FS(identity, "event-write")
}

// NonZero lists the non-zero entries, sorted, for logs and the JSON result.
func (c Counters) NonZero() map[string]float64 {
	out := map[string]float64{}
	for k, v := range c {
		if v != 0 {
			out[k] = v
		}
	}
	return out
}

func (c Counters) String() string {
	var keys []string
	for k, v := range c {
		if v != 0 {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	var b strings.Builder
	for _, k := range keys {
		fmt.Fprintf(&b, "\n  %-48s %g", k, c[k])
	}
	return b.String()
}

// Usage is the control plane's CPU time and RSS from /proc.
type Usage struct {
	At        time.Time
	CPUSecs   map[string]float64 // utime+stime, by process
	RSSMiB    map[string]float64
	Available bool
}

// clkTck is USER_HZ, 100 on every Linux the project runs on.
const clkTck = 100

// ReadUsage reads kube-apiserver's and etcd's PIDs from runDir (the
// controlplane harness writes <name>.pid there) and their /proc entries.
func ReadUsage(runDir string) Usage {
	u := Usage{At: time.Now(), CPUSecs: map[string]float64{}, RSSMiB: map[string]float64{}, Available: true}
	for _, name := range []string{"kube-apiserver", "etcd"} {
		b, err := os.ReadFile(filepath.Join(runDir, name+".pid"))
		if err != nil {
			u.Available = false
			continue
		}
		pid := strings.TrimSpace(string(b))
		if stat, err := os.ReadFile("/proc/" + pid + "/stat"); err == nil {
			f := strings.Fields(string(stat[strings.LastIndexByte(string(stat), ')')+1:]))
			ut, _ := strconv.ParseFloat(f[11], 64)
			st, _ := strconv.ParseFloat(f[12], 64)
			u.CPUSecs[name] = (ut + st) / clkTck
		}
		if status, err := os.ReadFile("/proc/" + pid + "/status"); err == nil {
			for _, line := range strings.Split(string(status), "\n") {
				if rest, ok := strings.CutPrefix(line, "VmRSS:"); ok {
					kb, _ := strconv.ParseFloat(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 64)
					u.RSSMiB[name] = kb / 1024
				}
			}
		}
	}
	return u
}

// CPUCores is the mean CPU use per process between two readings, in cores.
func CPUCores(from, to Usage) map[string]float64 {
	out := map[string]float64{}
	secs := to.At.Sub(from.At).Seconds()
	for k, v := range to.CPUSecs {
		if b, ok := from.CPUSecs[k]; ok && v >= b && secs > 0 {
			out[k] = (v - b) / secs
		}
	}
	return out
}
