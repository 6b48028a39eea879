// Package prometheus runs a real, throwaway Prometheus server for tests: the
// Debian package's /usr/bin/prometheus on a free loopback port, with its
// configuration and TSDB in a temporary directory, scraping given targets
// every second. Tests ask it PromQL through the HTTP API (/api/v1/query), so
// what they check is what a user's Prometheus would see, staleness included.
//
//	srv, err := prometheus.Start(ctx, prometheus.Options{
//		Targets: []prometheus.Target{{Addr: "127.0.0.1:9809", Labels: map[string]string{"node": "n1"}}},
//	})
//	if errors.Is(err, prometheus.ErrBinaryMissing) {
//		t.Skip(err)
//	}
//	defer srv.Stop()
//	v, err := srv.Query(ctx, `sum(rate(prober_probe_total[30s]))`)
//
// The server is a child process stopped by its PID only (other tests run
// other Prometheus servers on the same machine at the same time), and it
// dies with the test binary (parent-death signal).
package prometheus

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/probed-dev/probed/test/harness/proc"
)

// ErrBinaryMissing is wrapped by Start's error when there is no prometheus
// binary (hack/install-deps.sh installs Debian's), and by Promtool's when
// there is no promtool.
var ErrBinaryMissing = errors.New("binary not found")

// DefaultJob is the job name of the scrape config, and so the job label of
// every scraped series: deploy/monitoring's PodMonitor gives probed the same.
const DefaultJob = "probed"

// Target is one scrape target.
type Target struct {
	// Addr is host:port, e.g. probed's --metrics-bind-address.
	Addr string
	// Labels are added to every series scraped from it (target labels),
	// e.g. node, as deploy/monitoring's PodMonitor relabeling adds.
	Labels map[string]string
}

// Scrape says how Prometheus reaches its targets: the scrape config's
// scheme, authorization and tls_config.
type Scrape struct {
	// HTTPS scrapes over TLS.
	HTTPS bool
	// BearerTokenFile is sent as "Authorization: Bearer <contents>"
	// (authorization.credentials_file; re-read at every scrape).
	BearerTokenFile string
	// CAFile verifies the targets' certificates, for ServerName; with
	// neither it nor InsecureSkipVerify, the system's roots do.
	CAFile, ServerName string
	// InsecureSkipVerify accepts any certificate (a self-signed one).
	InsecureSkipVerify bool
}

// Options configure Start. Only Targets is required.
type Options struct {
	// Binary defaults to "prometheus" on PATH, then /usr/bin/prometheus.
	Binary string
	// Targets are scraped at /metrics.
	Targets []Target
	// Scrape is how the targets are scraped; plain HTTP when zero.
	Scrape Scrape
	// Job is the scrape job's name; DefaultJob if empty.
	Job string
	// ScrapeInterval, also the rule evaluation interval; 1s if zero.
	ScrapeInterval time.Duration
	// LookbackDelta is --query.lookback-delta; Prometheus' 5m if zero. A
	// series that disappears from a target vanishes from queries at the next
	// scrape anyway (staleness marker); the lookback only matters for a
	// target that stops being scraped.
	LookbackDelta time.Duration
	// RuleFiles are loaded as rule_files (absolute paths), evaluated every
	// ScrapeInterval; their alerts show up in ALERTS{}.
	RuleFiles []string
	// Dir is the parent of the server's temporary directory; os.TempDir()
	// if empty.
	Dir string
	// StartTimeout bounds the wait for /-/ready; 60s if zero.
	StartTimeout time.Duration
}

// Server is a running Prometheus.
type Server struct {
	// URL is the server's base URL, http://127.0.0.1:<port>.
	URL string
	// Dir holds prometheus.yml, data/ and prometheus.log; removed by Stop.
	Dir string

	interval time.Duration
	proc     *proc.Process
	client   *http.Client
}

// Start writes the configuration and starts Prometheus, and returns once it
// is ready to answer queries. The first scrape happens within one interval.
func Start(ctx context.Context, o Options) (*Server, error) {
	bin, err := findBinary(o.Binary, "prometheus")
	if err != nil {
		return nil, err
	}
	if o.ScrapeInterval <= 0 {
		o.ScrapeInterval = time.Second
	}
	if o.Job == "" {
		o.Job = DefaultJob
	}
	if o.StartTimeout <= 0 {
		o.StartTimeout = 60 * time.Second
	}
	dir, err := os.MkdirTemp(o.Dir, "prometheus-")
	if err != nil {
		return nil, err
	}
	cfgPath := filepath.Join(dir, "prometheus.yml")
	if err := os.WriteFile(cfgPath, []byte(config(o)), 0o644); err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	// A free port can be taken between our probe and Prometheus' bind by
	// another test; try a few.
	var lastErr error
	for attempt := 0; attempt < 3; attempt++ {
		s, err := start(ctx, bin, dir, cfgPath, o)
		if err == nil {
			return s, nil
		}
		lastErr = err
		if !strings.Contains(err.Error(), "address already in use") {
			break
		}
	}
	os.RemoveAll(dir)
	return nil, lastErr
}

func start(ctx context.Context, bin, dir, cfgPath string, o Options) (*Server, error) {
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
	args := []string{
		"--config.file=" + cfgPath,
		"--storage.tsdb.path=" + filepath.Join(dir, "data"),
		"--storage.tsdb.retention.time=1d",
		"--web.listen-address=" + addr,
		"--log.level=info",
	}
	if o.LookbackDelta > 0 {
		args = append(args, "--query.lookback-delta="+o.LookbackDelta.String())
	}
	// If the test binary dies, Prometheus dies with it (proc's default).
	p, err := proc.Start("prometheus", filepath.Join(dir, "prometheus.log"), filepath.Join(dir, "prometheus.pid"), bin, args, proc.Options{Dir: dir})
	if err != nil {
		return nil, err
	}
	s := &Server{
		URL: "http://" + addr, Dir: dir, interval: o.ScrapeInterval,
		proc: p, client: &http.Client{Timeout: 30 * time.Second},
	}

	ctx, cancel := context.WithTimeout(ctx, o.StartTimeout)
	defer cancel()
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-p.Done():
			return nil, p.Failure("prometheus exited before it was ready")
		case <-ctx.Done():
			_ = p.Kill()
			return nil, p.Failure("prometheus not ready within %v: %v", o.StartTimeout, ctx.Err())
		case <-tick.C:
		}
		resp, err := s.client.Get(s.URL + "/-/ready")
		if err != nil {
			continue
		}
		resp.Body.Close()
		if resp.StatusCode == http.StatusOK {
			return s, nil
		}
	}
}

// config renders prometheus.yml. honor_labels keeps the namespace, pod and
// container labels of prober_probe_total as probed exposes them, as the
// PodMonitor in deploy/monitoring does (and as the kubelet's scrape does).
func config(o Options) string {
	var b strings.Builder
	iv := o.ScrapeInterval.String()
	fmt.Fprintf(&b, "global:\n  scrape_interval: %s\n  scrape_timeout: %s\n  evaluation_interval: %s\n", iv, iv, iv)
	if len(o.RuleFiles) > 0 {
		b.WriteString("rule_files:\n")
		for _, f := range o.RuleFiles {
			fmt.Fprintf(&b, "- %s\n", quote(f))
		}
	}
	fmt.Fprintf(&b, "scrape_configs:\n- job_name: %s\n  honor_labels: true\n  metrics_path: /metrics\n", quote(o.Job))
	if sc := o.Scrape; sc.HTTPS {
		b.WriteString("  scheme: https\n  tls_config:\n")
		if sc.CAFile != "" {
			fmt.Fprintf(&b, "    ca_file: %s\n", quote(sc.CAFile))
		}
		if sc.ServerName != "" {
			fmt.Fprintf(&b, "    server_name: %s\n", quote(sc.ServerName))
		}
		fmt.Fprintf(&b, "    insecure_skip_verify: %v\n", sc.InsecureSkipVerify)
	}
	if o.Scrape.BearerTokenFile != "" {
		fmt.Fprintf(&b, "  authorization:\n    type: Bearer\n    credentials_file: %s\n", quote(o.Scrape.BearerTokenFile))
	}
	b.WriteString("  static_configs:\n")
	for _, t := range o.Targets {
		fmt.Fprintf(&b, "  - targets: [%s]\n", quote(t.Addr))
		if len(t.Labels) > 0 {
			b.WriteString("    labels:\n")
			keys := make([]string, 0, len(t.Labels))
			for k := range t.Labels {
				keys = append(keys, k)
			}
			sort.Strings(keys)
			for _, k := range keys {
				fmt.Fprintf(&b, "      %s: %s\n", k, quote(t.Labels[k]))
			}
		}
	}
	return b.String()
}

// quote makes s a YAML (JSON) double-quoted scalar.
func quote(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

func freePort() (int, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port, nil
}

func findBinary(explicit, name string) (string, error) {
	if explicit != "" {
		if _, err := os.Stat(explicit); err != nil {
			return "", fmt.Errorf("%s: %w: %v", explicit, ErrBinaryMissing, err)
		}
		return explicit, nil
	}
	if p, err := exec.LookPath(name); err == nil {
		return p, nil
	}
	p := "/usr/bin/" + name
	if _, err := os.Stat(p); err != nil {
		return "", fmt.Errorf("%s: %w (install Debian's prometheus package: hack/install-deps.sh)", name, ErrBinaryMissing)
	}
	return p, nil
}

// ScrapeInterval is the server's scrape (and rule evaluation) interval.
func (s *Server) ScrapeInterval() time.Duration { return s.interval }

// PID is the server's process ID.
func (s *Server) PID() int { return s.proc.PID() }

// Stop sends SIGTERM to the server's PID, waits for it to exit (SIGKILL
// after 15s) and removes its directory. It may be called more than once.
func (s *Server) Stop() error {
	_ = s.proc.Stop(15 * time.Second)
	return os.RemoveAll(s.Dir)
}

// LogTail is the last n lines of the server's log.
func (s *Server) LogTail(n int) string { return proc.Tail(s.proc.LogPath, n) }

// Sample is one element of an instant vector.
type Sample struct {
	// Metric holds the labels, __name__ included when the query keeps it.
	Metric map[string]string
	Value  float64
	Time   time.Time
}

// String renders the sample as name{labels} value.
func (s Sample) String() string {
	keys := make([]string, 0, len(s.Metric))
	for k := range s.Metric {
		if k != "__name__" {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = fmt.Sprintf("%s=%q", k, s.Metric[k])
	}
	return fmt.Sprintf("%s{%s} %g", s.Metric["__name__"], strings.Join(parts, ","), s.Value)
}

// Vector is an instant query's result.
type Vector []Sample

// String renders one sample per line.
func (v Vector) String() string {
	lines := make([]string, len(v))
	for i, s := range v {
		lines[i] = s.String()
	}
	return strings.Join(lines, "\n")
}

// Values are the sample values.
func (v Vector) Values() []float64 {
	out := make([]float64, len(v))
	for i, s := range v {
		out[i] = s.Value
	}
	return out
}

// Query evaluates promql at the server's "now" (/api/v1/query without a
// time). An instant vector comes back as is, a scalar as one sample with no
// labels; a range vector or string is an error.
func (s *Server) Query(ctx context.Context, promql string) (Vector, error) {
	return s.query(ctx, promql, time.Time{})
}

// QueryAt evaluates promql at t.
func (s *Server) QueryAt(ctx context.Context, promql string, t time.Time) (Vector, error) {
	return s.query(ctx, promql, t)
}

// APIError is an error the query API answered with (bad_data for a syntax
// error, execution, timeout, ...).
type APIError struct {
	Type, Message, Query string
}

func (e *APIError) Error() string {
	return fmt.Sprintf("prometheus %s error for %q: %s", e.Type, e.Query, e.Message)
}

type apiResponse struct {
	Status    string          `json:"status"`
	ErrorType string          `json:"errorType"`
	Error     string          `json:"error"`
	Data      json.RawMessage `json:"data"`
}

type queryData struct {
	ResultType string          `json:"resultType"`
	Result     json.RawMessage `json:"result"`
}

func (s *Server) query(ctx context.Context, promql string, at time.Time) (Vector, error) {
	form := url.Values{"query": {promql}}
	if !at.IsZero() {
		form.Set("time", strconv.FormatFloat(float64(at.UnixNano())/1e9, 'f', 3, 64))
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, s.URL+"/api/v1/query", strings.NewReader(form.Encode()))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	resp, err := s.client.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, err
	}
	var r apiResponse
	if err := json.Unmarshal(body, &r); err != nil {
		return nil, fmt.Errorf("query %q: HTTP %d: %s", promql, resp.StatusCode, bytes.TrimSpace(body))
	}
	if r.Status != "success" {
		return nil, &APIError{Type: r.ErrorType, Message: r.Error, Query: promql}
	}
	var d queryData
	if err := json.Unmarshal(r.Data, &d); err != nil {
		return nil, fmt.Errorf("query %q: decoding data: %w", promql, err)
	}
	switch d.ResultType {
	case "vector":
		var raw []struct {
			Metric map[string]string `json:"metric"`
			Value  [2]any            `json:"value"`
		}
		if err := json.Unmarshal(d.Result, &raw); err != nil {
			return nil, fmt.Errorf("query %q: decoding vector: %w", promql, err)
		}
		out := make(Vector, 0, len(raw))
		for _, e := range raw {
			t, v, err := point(e.Value)
			if err != nil {
				return nil, fmt.Errorf("query %q: %w", promql, err)
			}
			out = append(out, Sample{Metric: e.Metric, Value: v, Time: t})
		}
		return out, nil
	case "scalar":
		var raw [2]any
		if err := json.Unmarshal(d.Result, &raw); err != nil {
			return nil, fmt.Errorf("query %q: decoding scalar: %w", promql, err)
		}
		t, v, err := point(raw)
		if err != nil {
			return nil, fmt.Errorf("query %q: %w", promql, err)
		}
		return Vector{{Metric: map[string]string{}, Value: v, Time: t}}, nil
	}
	return nil, fmt.Errorf("query %q: result type %q, want vector or scalar", promql, d.ResultType)
}

// point decodes the API's [<unix seconds>, "<value>"].
func point(p [2]any) (time.Time, float64, error) {
	ts, ok := p[0].(float64)
	if !ok {
		return time.Time{}, 0, fmt.Errorf("bad timestamp %v", p[0])
	}
	vs, ok := p[1].(string)
	if !ok {
		return time.Time{}, 0, fmt.Errorf("bad value %v", p[1])
	}
	v, err := strconv.ParseFloat(vs, 64)
	if err != nil {
		return time.Time{}, 0, fmt.Errorf("bad value %q: %w", vs, err)
	}
	sec := int64(ts)
	return time.Unix(sec, int64((ts-float64(sec))*1e9)), v, nil
}

// Metadata returns the type (counter, gauge, histogram, ...) of each metric
// family the targets expose, as scraped (/api/v1/metadata).
func (s *Server) Metadata(ctx context.Context) (map[string]string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, s.URL+"/api/v1/metadata", nil)
	if err != nil {
		return nil, err
	}
	resp, err := s.client.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	var r apiResponse
	if err := json.NewDecoder(resp.Body).Decode(&r); err != nil {
		return nil, fmt.Errorf("metadata: %w", err)
	}
	if r.Status != "success" {
		return nil, &APIError{Type: r.ErrorType, Message: r.Error, Query: "/api/v1/metadata"}
	}
	var data map[string][]struct {
		Type string `json:"type"`
		Help string `json:"help"`
	}
	if err := json.Unmarshal(r.Data, &data); err != nil {
		return nil, fmt.Errorf("metadata: %w", err)
	}
	out := make(map[string]string, len(data))
	for name, entries := range data {
		if len(entries) > 0 {
			out[name] = entries[0].Type
		}
	}
	return out, nil
}

// WaitUp waits until every target's up series is 1.
func (s *Server) WaitUp(ctx context.Context, targets int) error {
	for {
		v, err := s.Query(ctx, "up == 1")
		if err == nil && len(v) >= targets {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("waiting for %d targets up (last: %v, %v): %w", targets, v, err, ctx.Err())
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// Promtool runs promtool with args and stdin (may be nil) and returns its
// combined output. The error wraps ErrBinaryMissing when there is no
// promtool, and is an *exec.ExitError when it reported problems.
func Promtool(ctx context.Context, stdin io.Reader, args ...string) (string, error) {
	bin, err := findBinary("", "promtool")
	if err != nil {
		return "", err
	}
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Stdin = stdin
	out, err := cmd.CombinedOutput()
	return string(out), err
}
