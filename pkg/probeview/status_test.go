package probeview

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/probed-dev/probed/pkg/prober"
	"github.com/probed-dev/probed/pkg/worker"
)

func results(words ...string) []Result {
	t0 := time.Date(2026, 11, 25, 14, 0, 0, 0, time.UTC)
	out := make([]Result, len(words))
	for i, w := range words {
		out[i] = Result{Time: t0.Add(time.Duration(i) * 2 * time.Second), Result: w, Duration: Duration(3 * time.Millisecond)}
	}
	return out
}

func TestStrip(t *testing.T) {
	for _, tc := range []struct {
		words []string
		want  string
	}{
		{nil, "··········"},
		{[]string{"success", "failure"}, "········✓✗"},
		{[]string{"success", "unknown", "error", "failure"}, "······✓?!✗"},
		// Only the last ten, oldest first.
		{[]string{"failure", "failure", "success", "success", "success", "success", "success", "success", "success", "failure", "failure", "failure"},
			"✓✓✓✓✓✓✓✗✗✗"},
	} {
		if got := Strip(results(tc.words...)); got != tc.want {
			t.Errorf("Strip(%v) = %q, want %q", tc.words, got, tc.want)
		}
	}
}

func TestStatusTable(t *testing.T) {
	hist := results("success", "success", "success", "failure", "failure", "failure", "failure")
	hist[6].Output = "cat: can't open '/tmp/ready':\nNo such file or directory"
	hist[5].Result, hist[5].Error, hist[5].Output = "error", "exec queue full", ""
	probes := []Probe{
		{Container: "app", ProbeType: "Readiness", State: "running", Spec: "exec [cat /tmp/ready] delay=0s timeout=1s period=2s #success=1 #failure=3",
			LastResult: "failure", ResultRun: 3, History: hist},
		{Container: "app", ProbeType: "Liveness", State: "pending", Spec: "tcp-socket :8080 delay=0s timeout=1s period=10s #success=1 #failure=3",
			RestartDeferred: "restart deferred: PodDisruptionBudget ns/web allows no disruption now",
			TLS: &TLSPeer{ServerName: "web.test", Verified: true, Subject: "CN=web", DNSNames: []string{"web.test"}, Issuer: "CN=ca",
				NotAfter: hist[6].Time.Add(48 * time.Hour), ClientNotAfter: hist[6].Time.Add(-time.Hour)}},
	}
	var b bytes.Buffer
	now := hist[6].Time.Add(5 * time.Second)
	if err := Status(&b, probes, StatusOptions{Now: now}); err != nil {
		t.Fatal(err)
	}
	want := `CONTAINER  PROBE      STATE    RESULT      LAST 10     SPEC
app        Liveness   pending  -           ··········  tcp-socket :8080 delay=0s timeout=1s period=10s #success=1 #failure=3
app        Readiness  running  failure ×3  ···✓✓✓✗✗!✗  exec [cat /tmp/ready] delay=0s timeout=1s period=2s #success=1 #failure=3
(` + StripLegend + `)

app Liveness: restart deferred: PodDisruptionBudget ns/web allows no disruption now

app Liveness TLS: CN=web (web.test), verified for web.test, issued by CN=ca; server certificate expires 2026-11-27T14:00:12Z (in 48h0m0s), client certificate 2026-11-25T13:00:12Z (expired 1h0m0s ago)

app Readiness, last 7 results:
  AGE  RESULT   DURATION  OUTPUT
  17s  success  3ms       
  15s  success  3ms       
  13s  success  3ms       
  11s  failure  3ms       
  9s   failure  3ms       
  7s   error    3ms       error: exec queue full
  5s   failure  3ms       cat: can't open '/tmp/ready': No such file or directory
`
	if got := b.String(); got != want {
		t.Errorf("Status:\n%s\nwant:\n%s", got, want)
	}
}

// A container's output must not reach the terminal as control sequences.
func TestStatusEscapesOutput(t *testing.T) {
	hist := results("failure")
	hist[0].Output = "\x1b]0;owned\x07\x1b[2Jgone"
	var b bytes.Buffer
	if err := Status(&b, []Probe{{Container: "c", ProbeType: "Liveness", Spec: "exec [\x1b[31mred]", History: hist}}, StatusOptions{Now: hist[0].Time}); err != nil {
		t.Fatal(err)
	}
	if strings.ContainsAny(b.String(), "\x1b\x07") {
		t.Errorf("control characters reached the output: %q", b.String())
	}
	if !strings.Contains(b.String(), "?]0;owned??[2Jgone") || !strings.Contains(b.String(), "exec [?[31mred]") {
		t.Errorf("output not shown with ? for control characters:\n%s", b.String())
	}
}

func TestOneLineCuts(t *testing.T) {
	if got := oneLine(strings.Repeat("é", 100), 10); got != strings.Repeat("é", 9)+"…" {
		t.Errorf("oneLine = %q", got)
	}
}

// The plugin decodes what the daemon encodes: worker.Snapshot's JSON.
func TestDecodesWorkerSnapshot(t *testing.T) {
	at := time.Date(2026, 11, 25, 14, 0, 0, 0, time.UTC)
	in := []worker.Snapshot{{
		PodNamespace: "default", PodName: "web", PodUID: "u1", Container: "app", ProbeType: "Readiness",
		Spec: "exec [false]", State: worker.StateRunning, ContainerID: "containerd://1", Published: "failure",
		LastResult: "failure", ResultRun: 2,
		TLS: &prober.TLSPeer{ServerName: "web.test", Verified: true, Subject: "CN=web", DNSNames: []string{"web.test"}, Issuer: "CN=ca",
			NotAfter: at.Add(time.Hour), ClientNotAfter: at.Add(2 * time.Hour), At: at},
		History: []worker.HistoryEntry{{Time: at, Result: "failure", Duration: 12500 * time.Microsecond, Output: "no", Error: "boom"}},
	}}
	body, err := json.Marshal(in)
	if err != nil {
		t.Fatal(err)
	}
	got, err := DecodeProbes(bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	want := Probe{PodNamespace: "default", PodName: "web", PodUID: "u1", Container: "app", ProbeType: "Readiness",
		Spec: "exec [false]", State: "running", ContainerID: "containerd://1", Published: "failure", LastResult: "failure", ResultRun: 2,
		TLS: &TLSPeer{ServerName: "web.test", Verified: true, Subject: "CN=web", DNSNames: []string{"web.test"}, Issuer: "CN=ca",
			NotAfter: at.Add(time.Hour), ClientNotAfter: at.Add(2 * time.Hour), At: at},
		History: []Result{{Time: at, Result: "failure", Duration: Duration(12500 * time.Microsecond), Output: "no", Error: "boom"}}}
	if len(got) != 1 || !equalProbe(got[0], want) {
		t.Errorf("decoded %+v, want %+v", got, want)
	}
	if _, err := DecodeProbes(strings.NewReader(`[{"history":[{"duration":"soon"}]}]`)); err == nil {
		t.Error("a malformed duration decoded without error")
	}
}

func equalProbe(a, b Probe) bool {
	ja, _ := json.Marshal(a)
	jb, _ := json.Marshal(b)
	return bytes.Equal(ja, jb) && a.History[0].Duration == b.History[0].Duration
}
