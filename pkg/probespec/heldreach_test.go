package probespec

import (
	"reflect"
	"strings"
	"testing"
)

// A reach record is an approval's format, read back as strictly, and
// equal to the approval of the same pod.
func TestReachRecordRoundTrip(t *testing.T) {
	pod := testPod(`{"app": {"livenessProbe": {"exec": {"command": ["cat", "/tmp/healthy"]}}, "startupProbe": {"tcpSocket": {"port": 1, "host": "db"}}}}`)
	r, err := PodReach(pod)
	if err != nil {
		t.Fatal(err)
	}
	approval, _ := ApproveReach(pod)
	if r.String() != approval || len(r) != 2 {
		t.Errorf("record %q; want the approval %q", r.String(), approval)
	}
	back, err := ParseReachRecord(r.String())
	if err != nil || !reflect.DeepEqual(back, r) {
		t.Errorf("ParseReachRecord = %v, %v; want %v", back, err, r)
	}
	if empty, err := ParseReachRecord(ReachRecord{}.String()); err != nil || len(empty) != 0 {
		t.Errorf("the empty record: %v %v", empty, err)
	}
	if _, err := ParseReachRecord("v1,app/livenessProbe=zz"); err == nil {
		t.Error("a malformed record read")
	}
}

// HoldReach keeps what the record holds, probes without reach, and spec
// probes; every other annotation probe is refused, naming its fields and
// the policy's state.
func TestHoldReach(t *testing.T) {
	created := testPod(`{"app": {"livenessProbe": {"exec": {"command": ["cat", "/tmp/healthy"]}}, "readinessProbe": {"httpGet": {"port": 80}}}}`)
	record, err := PodReach(created)
	if err != nil {
		t.Fatal(err)
	}
	edited := testPod(`{"app": {"livenessProbe": {"exec": {"command": ["cat", "/tmp/healthy"]}, "periodSeconds": 3}, ` +
		`"readinessProbe": {"httpGet": {"port": 81, "path": "/x"}}, "startupProbe": {"exec": {"command": ["id"]}}}}`)
	declared, problems := DeclaredProbes(edited, ProbeSourceAnnotation)
	if len(problems) > 0 {
		t.Fatal(problems)
	}
	kept, problems := HoldReach(edited, declared, nil, record, "no such ValidatingAdmissionPolicy")
	if got, want := probeKeysOf(kept), []string{"app/Liveness/ann", "app/Readiness/ann"}; !reflect.DeepEqual(got, want) {
		t.Errorf("kept %v; want %v", got, want)
	}
	got := problemStrings(problems)
	if len(got) != 1 || !strings.HasPrefix(got[0], `container "app" startupProbe: exec.command: Forbidden: changed after probed first saw the pod, while the probe-reach admission policy is not in force (no such ValidatingAdmissionPolicy)`) {
		t.Errorf("problems %q", got)
	}
}
