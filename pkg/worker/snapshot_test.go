package worker

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/probed-dev/probed/pkg/probespec"
	"github.com/probed-dev/probed/pkg/results"
)

// TestSnapshotSaysFromPod checks that /debug/probes tells a probe sent from
// inside the pod's network namespace from one sent from the node.
func TestSnapshotSaysFromPod(t *testing.T) {
	spec := v1.Probe{FailureThreshold: 3, ProbeHandler: v1.ProbeHandler{TCPSocket: &v1.TCPSocketAction{Port: intstr.FromInt32(8080)}}}
	_, node := newEnv(t, probespec.Readiness, spec)
	_, pod := newEnv(t, probespec.Readiness, spec, func(c *Config) { c.FromPod = true })
	if s := node.Snapshot().Spec; strings.Contains(s, "from=") {
		t.Errorf("a probe from the node: spec %q, want no from=", s)
	}
	if s := pod.Snapshot().Spec; !strings.HasSuffix(s, " from=Pod") {
		t.Errorf("a probe from the pod: spec %q, want it to end with from=Pod", s)
	}
}

func TestSnapshot(t *testing.T) {
	e, w := newEnv(t, probespec.Liveness, v1.Probe{FailureThreshold: 3})
	e.pods.set(runningPod(epoch))

	s := w.Snapshot()
	if s.LastResult != "" || s.ContainerID != "" || len(s.History) != 0 {
		t.Errorf("fresh snapshot = %+v", s)
	}

	e.prober.mu.Lock()
	e.prober.output = strings.Repeat("é", 200) // 400 bytes
	e.prober.mu.Unlock()
	for i := 0; i < 12; i++ {
		if i == 10 {
			e.prober.set(results.Failure)
		}
		expectContinue(t, w, fmt.Sprintf("probe %d", i))
		e.clock.Step(10 * time.Second)
	}

	s = w.Snapshot()
	if s.PodNamespace != testNamespace || s.PodName != testPodName || s.PodUID != testUID ||
		s.Container != testContainer || s.ProbeType != "Liveness" {
		t.Errorf("identity = %+v", s)
	}
	if s.State != StateRunning || s.ContainerID != testID || s.LastResult != "failure" || s.ResultRun != 2 || s.Published != "success" {
		t.Errorf("state = %q, id = %q, last = %q x%d, published = %q", s.State, s.ContainerID, s.LastResult, s.ResultRun, s.Published)
	}
	if len(s.History) != historySize {
		t.Fatalf("history has %d entries, want %d", len(s.History), historySize)
	}
	if first, last := s.History[0], s.History[historySize-1]; !first.Time.Equal(epoch.Add(20*time.Second)) ||
		!last.Time.Equal(epoch.Add(110*time.Second)) || last.Result != "failure" {
		t.Errorf("history runs %v..%v, last %q; want oldest first, the 10 latest", first.Time.Sub(epoch), last.Time.Sub(epoch), last.Result)
	}
	out := s.History[0].Output
	if len(out) > maxExcerptBytes || !utf8.ValidString(out) || len(out) < maxExcerptBytes-1 {
		t.Errorf("excerpt is %d bytes (valid UTF-8: %v)", len(out), utf8.ValidString(out))
	}

	b, err := json.Marshal(s)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`"state":"running"`, `"duration":"0s"`, `"result":"failure"`, `"spec":"exec [true] delay=0s`} {
		if !strings.Contains(string(b), want) {
			t.Errorf("JSON lacks %s: %s", want, b)
		}
	}
}

func TestSpecSummary(t *testing.T) {
	attrs := "delay=1s timeout=2s period=3s #success=1 #failure=4"
	base := v1.Probe{InitialDelaySeconds: 1, TimeoutSeconds: 2, PeriodSeconds: 3, SuccessThreshold: 1, FailureThreshold: 4}
	with := func(h v1.ProbeHandler) *v1.Probe { p := base; p.ProbeHandler = h; return &p }
	svc := "health"
	tests := []struct {
		probe *v1.Probe
		want  string
	}{
		{nil, "<none>"},
		{with(v1.ProbeHandler{Exec: &v1.ExecAction{Command: []string{"cat", "/tmp/healthy"}}}), "exec [cat /tmp/healthy] " + attrs},
		{with(v1.ProbeHandler{HTTPGet: &v1.HTTPGetAction{Path: "/ready", Port: intstr.FromString("http")}}), "http-get http://:http/ready " + attrs},
		{with(v1.ProbeHandler{HTTPGet: &v1.HTTPGetAction{Host: "10.1.1.1", Path: "/", Port: intstr.FromInt32(8443), Scheme: v1.URISchemeHTTPS}}), "http-get https://10.1.1.1:8443/ " + attrs},
		{with(v1.ProbeHandler{TCPSocket: &v1.TCPSocketAction{Port: intstr.FromInt32(5432)}}), "tcp-socket :5432 " + attrs},
		{with(v1.ProbeHandler{GRPC: &v1.GRPCAction{Port: 9090, Service: &svc}}), `grpc :9090 service="health" ` + attrs},
		{with(v1.ProbeHandler{GRPC: &v1.GRPCAction{Port: 9090}}), `grpc :9090 service="" ` + attrs},
		{with(v1.ProbeHandler{}), "unknown " + attrs},
	}
	for _, tc := range tests {
		if got := SpecSummary(tc.probe); got != tc.want {
			t.Errorf("SpecSummary = %q, want %q", got, tc.want)
		}
	}
}

func TestExcerpt(t *testing.T) {
	short := "ok"
	if excerpt(short) != short {
		t.Error("short output changed")
	}
	long := strings.Repeat("a", 300)
	if got := excerpt(long); len(got) != maxExcerptBytes {
		t.Errorf("excerpt is %d bytes", len(got))
	}
}

func TestHistoryEntryJSON(t *testing.T) {
	b, err := json.Marshal(HistoryEntry{Time: epoch, Result: "error", Duration: 1500 * time.Millisecond, Error: "timeout"})
	if err != nil {
		t.Fatal(err)
	}
	want := `{"time":"2025-06-01T12:00:00Z","result":"error","duration":"1.5s","error":"timeout"}`
	if string(b) != want {
		t.Errorf("JSON = %s, want %s", b, want)
	}
}
