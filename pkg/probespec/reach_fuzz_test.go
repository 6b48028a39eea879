package probespec

import (
	"encoding/json"
	"testing"
)

// FuzzApproveReach feeds arbitrary annotations to ApproveReach and checks
// its promises: it never panics; on a pod stamped with its value every
// declared probe runs (even with approval required) and no edit is
// unapproved; the value parses; and it depends on the parsed probes only,
// not on how the annotation is written (re-encoded as JSON it is the same).
func FuzzApproveReach(f *testing.F) {
	f.Add(`{"app": {"livenessProbe": {"exec": {"command": ["cat", "/tmp/healthy"]}}, "readinessProbe": {"httpGet": {"port": "http", "host": "h", "httpHeaders": [{"name": "Host", "value": "x"}]}, "probed.io/expectStatus": [200]}}}`, false)
	f.Add("side:\n  startupProbe:\n    tcpSocket: {port: metrics, host: db}\n", true)
	f.Add(`{"app": {"readinessProbe": {"grpc": {"port": 9090, "mode": "TLS"}, "probed.io/keepAlive": true}}}`, true)
	f.Fuzz(func(t *testing.T, annotation string, hostNetwork bool) {
		pod := fuzzPod(annotation, "metrics", 9090, true)
		pod.Spec.HostNetwork = hostNetwork
		v, err := ApproveReach(pod)
		if err != nil {
			return
		}
		if again, _ := ApproveReach(pod); again != v {
			t.Fatalf("not deterministic: %q, %q", v, again)
		}
		if _, err := parseApproval(v); err != nil {
			t.Fatalf("ApproveReach made %q, which does not parse: %v", v, err)
		}
		stamped := pod.DeepCopy()
		stamped.Annotations[ApprovedReachAnnotation] = v
		declared, _ := DeclaredProbes(stamped, ProbeSourceAnnotation)
		kept, problems := CheckReach(stamped, declared, nil, true)
		if len(kept) != len(declared) || len(problems) != 0 {
			t.Fatalf("its own approval refuses %v", problemStrings(problems))
		}
		if edits, err := UnapprovedReachEdits(stamped, stamped); err != nil || len(edits) != 0 {
			t.Fatalf("an update that changes nothing: %v, %v", problemStrings(edits), err)
		}
		// The same probes written as canonical JSON.
		entries, whole := decodeAnnotation(annotation)
		if whole != nil {
			t.Fatalf("ApproveReach accepted what decodeAnnotation refuses: %v", whole)
		}
		out := map[string]map[string]any{}
		for c, e := range entries {
			out[c] = map[string]any{}
			for _, pt := range probeTypes {
				if ap := e[pt.typ]; ap != nil {
					out[c][pt.field] = reencode(ap)
				}
			}
		}
		b, _ := json.Marshal(out)
		if len(b) > MaxAnnotationBytes {
			return // as JSON, over the limit
		}
		re := pod.DeepCopy()
		re.Annotations[ProbesAnnotation] = string(b)
		if got, err := ApproveReach(re); err != nil || got != v {
			t.Fatalf("re-encoded %s: %q, %v; want %q", b, got, err, v)
		}
	})
}

// reencode writes an annotation probe back as the annotation's JSON.
func reencode(ap *annotatedProbe) map[string]any {
	b, _ := json.Marshal(ap.Probe)
	m := map[string]any{}
	_ = json.Unmarshal(b, &m)
	set := func(k string, v any, ok bool) {
		if ok {
			m[k] = v
		}
	}
	set(KeepAliveField, ap.KeepAlive, ap.KeepAlive != nil)
	set(ExpectStatusField, ap.ExpectStatus, ap.ExpectStatus != nil)
	set(ExpectBodyField, ap.ExpectBody, ap.ExpectBody != nil)
	set("probed.io/periodMilliseconds", ap.PeriodMs, ap.PeriodMs != nil)
	set("probed.io/timeoutMilliseconds", ap.TimeoutMs, ap.TimeoutMs != nil)
	return m
}
