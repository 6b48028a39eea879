package probespec

import (
	"reflect"
	"regexp"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
)

// approve returns ApproveReach of testPod(annotation), failing the test on
// an error.
func approve(t *testing.T, annotation string) string {
	t.Helper()
	v, err := ApproveReach(testPod(annotation))
	if err != nil {
		t.Fatalf("ApproveReach(%s): %v", annotation, err)
	}
	return v
}

// approvedEntries splits an approval into its "<key>=<digest>" entries.
func approvedEntries(t *testing.T, v string) map[string]string {
	t.Helper()
	m, err := parseApproval(v)
	if err != nil {
		t.Fatalf("parseApproval(%q): %v", v, err)
	}
	return m
}

func TestApproveReachFormat(t *testing.T) {
	ann := `{"app": {
	  "livenessProbe":  {"exec": {"command": ["cat", "/tmp/healthy"]}},
	  "readinessProbe": {"httpGet": {"path": "/ready", "port": "http"}, "periodSeconds": 2},
	  "startupProbe":   {"tcpSocket": {"port": 8080, "host": "db.internal"}}},
	 "sidecar": {"livenessProbe": {"grpc": {"port": 9000}}}}`
	v := approve(t, ann)
	if !regexp.MustCompile(`^v1,app/livenessProbe=[0-9a-f]{64},app/startupProbe=[0-9a-f]{64}$`).MatchString(v) {
		t.Errorf("ApproveReach = %q; want v1 then the exec and the tcpSocket.host probes, sorted", v)
	}
	if got := approve(t, `{"app": {"readinessProbe": {"httpGet": {"port": 80}}}}`); got != "v1" {
		t.Errorf("no probe with reach: %q; want v1", got)
	}
	if got := approve(t, "-"); got != "v1" {
		t.Errorf("no annotation: %q; want v1", got)
	}
	if _, err := ApproveReach(testPod(`{"app": `)); err == nil {
		t.Error("a malformed annotation: no error")
	}
}

// The digest is of the parsed probe: the annotation's syntax never
// changes it.
func TestApproveReachIgnoresSyntax(t *testing.T) {
	base := approve(t, `{"app":{"livenessProbe":{"exec":{"command":["sh","-c","echo ok"]},"periodSeconds":5},"readinessProbe":{"httpGet":{"port":80,"host":"10.1.2.3","httpHeaders":[{"name":"Host","value":"a"}]}}}}`)
	for name, ann := range map[string]string{
		"white space and key order":    "{ \"app\" : { \"readinessProbe\" : { \"httpGet\" : { \"httpHeaders\" : [ { \"value\" : \"a\" , \"name\" : \"Host\" } ] , \"host\" : \"10.1.2.3\" , \"port\" : 80 } } ,\n \"livenessProbe\" : { \"periodSeconds\" : 5 , \"exec\" : { \"command\" : [ \"sh\" , \"-c\" , \"echo ok\" ] } } } }",
		"escaped keys and values":      `{"app":{"livenessProbe":{"\u0065xec":{"command":["\u0073h","-c","echo\u0020ok"]},"periodSeconds":5},"readinessProbe":{"httpGet":{"port":80,"host":"10.1.2.3","httpHeaders":[{"name":"Host","value":"\u0061"}]}}}}`,
		"yaml":                         "app:\n  livenessProbe:\n    exec:\n      command: [sh, -c, echo ok]\n    periodSeconds: 5\n  readinessProbe:\n    httpGet: {port: 80, host: 10.1.2.3, httpHeaders: [{name: Host, value: a}]}\n",
		"yaml, block style and quotes": "app:\n  readinessProbe:\n    httpGet:\n      host: '10.1.2.3'\n      port: 80\n      httpHeaders:\n      - name: \"Host\"\n        value: a\n  livenessProbe:\n    periodSeconds: 5\n    exec:\n      command:\n      - sh\n      - \"-c\"\n      - echo ok\n",
	} {
		if got := approve(t, ann); got != base {
			t.Errorf("%s: %q; want %q", name, got, base)
		}
	}
}

// Timing, thresholds, and where on the pod's own IP a probe goes are free:
// editing them keeps the digest. Everything that decides what a probe runs
// or where it connects changes it.
func TestApproveReachFreeAndReachingEdits(t *testing.T) {
	const exec = `{"exec": {"command": ["cat", "/tmp/healthy"]}}`
	const host = `{"httpGet": {"port": 80, "path": "/", "host": "10.1.2.3"}}`
	const tcp = `{"tcpSocket": {"port": 80, "host": "10.1.2.3"}}`
	free := []struct{ name, before, after string }{
		{"exec timing", exec, `{"exec": {"command": ["cat", "/tmp/healthy"]}, "periodSeconds": 3, "timeoutSeconds": 9, "initialDelaySeconds": 4, "failureThreshold": 7, "successThreshold": 1, "terminationGracePeriodSeconds": 5}`},
		{"exec millisecond timing", exec, `{"exec": {"command": ["cat", "/tmp/healthy"]}, "probed.io/periodMilliseconds": 500, "probed.io/timeoutMilliseconds": 200}`},
		{"host probe's status check and keep-alive", host, `{"httpGet": {"port": 80, "path": "/", "host": "10.1.2.3"}, "probed.io/expectStatus": [204], "probed.io/keepAlive": true}`},
		{"host probe's timing", tcp, `{"tcpSocket": {"port": 80, "host": "10.1.2.3"}, "periodSeconds": 1}`},
		{"port, path and scheme on the pod's IP, with headers other than Host",
			`{"httpGet": {"port": 80, "path": "/", "httpHeaders": [{"name": "X-A", "value": "1"}]}}`,
			`{"httpGet": {"port": 81, "path": "/x", "scheme": "HTTPS", "httpHeaders": [{"name": "X-A", "value": "1"}]}}`},
		{"a body check's status check, protocol and timing", `{"httpGet": {"port": 80, "path": "/"}, "probed.io/expectBody": "^ok"}`,
			`{"httpGet": {"port": 80, "path": "/", "protocol": "HTTP2"}, "probed.io/expectBody": "^ok", "probed.io/expectStatus": [200], "periodSeconds": 1}`},
	}
	for _, tc := range free {
		if a, b := approve(t, annotationOf("app", "livenessProbe", tc.before)), approve(t, annotationOf("app", "livenessProbe", tc.after)); a != b {
			t.Errorf("%s: the digest changed (%q, %q)", tc.name, a, b)
		}
	}
	// Probes with no reach at all stay unapproved however they are edited.
	for _, p := range []string{
		`{"httpGet": {"port": 80}}`, `{"httpGet": {"port": "http", "path": "/x", "scheme": "HTTPS", "protocol": "HTTP2"}, "probed.io/expectStatus": [200]}`,
		`{"tcpSocket": {"port": 80}}`, `{"grpc": {"port": 9090, "service": "db", "mode": "TLS"}, "probed.io/keepAlive": true}`,
		`{"httpGet": {"port": 80, "host": "", "httpHeaders": []}}`,
	} {
		if got := approve(t, annotationOf("app", "readinessProbe", p)); got != "v1" {
			t.Errorf("%s: %q; want no reach", p, got)
		}
	}
	reaching := []struct{ name, before, after string }{
		{"exec command", exec, `{"exec": {"command": ["cat", "/var/run/secrets/kubernetes.io/serviceaccount/token"]}}`},
		{"exec argument order", `{"exec": {"command": ["a", "b"]}}`, `{"exec": {"command": ["b", "a"]}}`},
		{"httpGet to exec", `{"httpGet": {"port": 80, "host": "x"}}`, `{"exec": {"command": ["x"]}}`},
		{"host", host, `{"httpGet": {"port": 80, "path": "/", "host": "10.1.2.4"}}`},
		{"header added", host, `{"httpGet": {"port": 80, "path": "/", "host": "10.1.2.3", "httpHeaders": [{"name": "Host", "value": "admin.internal"}]}}`},
		{"header value", `{"httpGet": {"port": 80, "host": "h", "httpHeaders": [{"name": "X-A", "value": "1"}]}}`, `{"httpGet": {"port": 80, "host": "h", "httpHeaders": [{"name": "X-A", "value": "2"}]}}`},
		{"body check added", host, `{"httpGet": {"port": 80, "path": "/", "host": "10.1.2.3"}, "probed.io/expectBody": "^a"}`},
		{"httpGet host to tcpSocket host", `{"httpGet": {"port": 80, "host": "h"}}`, `{"tcpSocket": {"port": 80, "host": "h"}}`},
		{"tcp host", tcp, `{"tcpSocket": {"port": 80, "host": "10.9.9.9"}}`},
	}
	reaching = append(reaching, reAims...)
	for _, tc := range reaching {
		a := approvedEntries(t, approve(t, annotationOf("app", "livenessProbe", tc.before)))
		b := approvedEntries(t, approve(t, annotationOf("app", "livenessProbe", tc.after)))
		if a["app/livenessProbe"] == "" || b["app/livenessProbe"] == "" || a["app/livenessProbe"] == b["app/livenessProbe"] {
			t.Errorf("%s: digests %q and %q; want two different ones", tc.name, a, b)
		}
	}
	// Adding reach to a probe that had none.
	for _, p := range []string{exec, host, tcp, `{"httpGet": {"port": 80, "httpHeaders": [{"name": "Host", "value": "admin"}]}}`,
		`{"httpGet": {"port": 80}, "probed.io/expectBody": "^secret"}`} {
		if got := approve(t, annotationOf("app", "readinessProbe", p)); got == "v1" {
			t.Errorf("%s has no reach; want some", p)
		}
	}
	// The same probe on another container or as another type is another probe.
	one := approvedEntries(t, approve(t, annotationOf("app", "livenessProbe", exec)))
	moved := approvedEntries(t, approve(t, annotationOf("web", "livenessProbe", exec)))
	retyped := approvedEntries(t, approve(t, annotationOf("app", "startupProbe", exec)))
	if _, ok := moved["app/livenessProbe"]; ok || moved["web/livenessProbe"] == one["app/livenessProbe"] || retyped["app/startupProbe"] == one["app/livenessProbe"] {
		t.Errorf("moved or retyped probes share a digest: %q %q %q", one, moved, retyped)
	}
}

// reAims are edits that aim an approved probe elsewhere by its port, path
// or scheme alone: free on the pod's own IP, reach where the probe goes to
// a host, carries a Host header or checks the body (issue 30, item 3).
var reAims = []struct{ name, before, after string }{
	{"host probe to another service (the issue's)", `{"httpGet": {"host": "search.internal", "port": 8080}}`,
		`{"httpGet": {"host": "search.internal", "port": 9200, "scheme": "HTTPS", "path": "/_security/user/elastic"}}`},
	{"host probe's port", `{"httpGet": {"host": "search.internal", "port": 8080, "path": "/"}}`, `{"httpGet": {"host": "search.internal", "port": 9200, "path": "/"}}`},
	{"host probe's path", `{"httpGet": {"host": "search.internal", "port": 8080, "path": "/"}}`, `{"httpGet": {"host": "search.internal", "port": 8080, "path": "/admin"}}`},
	{"host probe's scheme", `{"httpGet": {"host": "search.internal", "port": 8080, "path": "/"}}`, `{"httpGet": {"host": "search.internal", "port": 8080, "path": "/", "scheme": "HTTPS"}}`},
	{"Host header probe's port and path", `{"httpGet": {"port": 80, "path": "/", "httpHeaders": [{"name": "host", "value": "admin.internal"}]}}`,
		`{"httpGet": {"port": 8443, "path": "/users", "scheme": "HTTPS", "httpHeaders": [{"name": "host", "value": "admin.internal"}]}}`},
	{"tcp host probe to ssh (the issue's)", `{"tcpSocket": {"host": "db.internal", "port": 5432}}`, `{"tcpSocket": {"host": "db.internal", "port": 22}}`},
	{"body check by path", `{"httpGet": {"port": 8080, "path": "/healthz"}, "probed.io/expectBody": "^ok$"}`,
		`{"httpGet": {"port": 8080, "path": "/debug/vars"}, "probed.io/expectBody": "^ok$"}`},
	{"body check by port", `{"httpGet": {"port": 8080, "path": "/healthz"}, "probed.io/expectBody": "^ok$"}`,
		`{"httpGet": {"port": 9090, "path": "/healthz"}, "probed.io/expectBody": "^ok$"}`},
	{"body check by scheme", `{"httpGet": {"port": 8080, "path": "/healthz"}, "probed.io/expectBody": "^ok$"}`,
		`{"httpGet": {"port": 8080, "path": "/healthz", "scheme": "HTTPS"}, "probed.io/expectBody": "^ok$"}`},
}

// TestReAimingNeedsExec: each re-aim of reAims, made by a patch-only
// editor of an approved pod, is refused by the webhook
// (UnapprovedReachEdits) and by the daemon (CheckReach, with and without
// --require-approved-reach), naming the fields that aim the probe.
func TestReAimingNeedsExec(t *testing.T) {
	for _, tc := range reAims {
		t.Run(tc.name, func(t *testing.T) {
			created := annotationOf("app", "readinessProbe", tc.before)
			approval := approve(t, created)
			old := withApproval(testPod(created), approval)
			edited := withApproval(testPod(annotationOf("app", "readinessProbe", tc.after)), approval)
			edits, err := UnapprovedReachEdits(old, edited)
			if err != nil || len(edits) != 1 || !strings.Contains(edits[0].String(), "Forbidden: changing what a probe runs or where it connects needs create on pods/exec") {
				t.Errorf("the webhook: %q, %v; want the edit refused", problemStrings(edits), err)
			}
			for _, require := range []bool{false, true} {
				declared, problems := DeclaredProbes(edited, ProbeSourceAnnotation)
				if len(problems) != 0 || len(declared) != 1 {
					t.Fatalf("DeclaredProbes: %q", problemStrings(problems))
				}
				kept, problems := CheckReach(edited, declared, nil, require)
				if len(kept) != 0 || len(problems) != 1 || !strings.Contains(problems[0].Field, ".port") ||
					!strings.Contains(problems[0].Detail, "does not cover what this probe runs or where it connects") {
					t.Errorf("the daemon (require %v): kept %v, problems %q", require, probeKeysOf(kept), problemStrings(problems))
				}
			}
			// As created, the probe runs.
			declared, _ := DeclaredProbes(old, ProbeSourceAnnotation)
			if kept, problems := CheckReach(old, declared, nil, true); len(kept) != 1 || len(problems) != 0 {
				t.Errorf("as created: kept %v, problems %q", probeKeysOf(kept), problemStrings(problems))
			}
		})
	}
}

// On a hostNetwork pod the pod's IP is the node's: the port is reach.
func TestApproveReachHostNetworkPorts(t *testing.T) {
	at := func(hostNetwork bool, probe string) string {
		pod := testPod(annotationOf("app", "readinessProbe", probe))
		pod.Spec.HostNetwork = hostNetwork
		v, err := ApproveReach(pod)
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	for _, pair := range [][2]string{
		{`{"httpGet": {"port": 8080, "path": "/a"}}`, `{"httpGet": {"port": 10250, "path": "/a"}}`},
		{`{"tcpSocket": {"port": 8080}}`, `{"tcpSocket": {"port": 2379}}`},
		{`{"grpc": {"port": 8080}}`, `{"grpc": {"port": 2379}}`},
	} {
		if at(false, pair[0]) != "v1" || at(false, pair[1]) != "v1" {
			t.Errorf("%s: a port on a pod IP counts as reach", pair[0])
		}
		if a, b := at(true, pair[0]), at(true, pair[1]); a == "v1" || a == b {
			t.Errorf("hostNetwork %s vs %s: %q, %q; want two different digests", pair[0], pair[1], a, b)
		}
	}
	if at(true, `{"httpGet": {"port": 8080, "path": "/a"}}`) != at(true, `{"httpGet": {"port": 8080, "path": "/b", "scheme": "HTTPS"}, "periodSeconds": 1}`) {
		t.Error("hostNetwork: the path or timing changed the digest")
	}
}

func TestParseApproval(t *testing.T) {
	d := strings.Repeat("ab", 32)
	for _, tc := range []struct {
		v       string
		wantErr string
	}{
		{"v1", ""},
		{"v1,app/livenessProbe=" + d + ",web/startupProbe=" + d, ""},
		{"", `must start with "v1"`},
		{"v2,app/livenessProbe=" + d, `must start with "v1"`},
		{" v1", `must start with "v1"`},
		{"v1,", `entry "" is not`},
		{"v1,app/livenessProbe=" + d + ",app/livenessProbe=" + d, `"app/livenessProbe" is there twice`},
		{"v1,app/livenesProbe=" + d, `is not <container>/`},
		{"v1,/livenessProbe=" + d, `is not <container>/`},
		{"v1,app/livenessProbe", `is not <container>/`},
		{"v1,app/livenessProbe=" + strings.ToUpper(d), "64 lower-case hex digits"},
		{"v1,app/livenessProbe=" + d[:63], "64 lower-case hex digits"},
		{"v1,app/livenessProbe=" + d + " ", "64 lower-case hex digits"},
	} {
		_, err := parseApproval(tc.v)
		if (err == nil) != (tc.wantErr == "") || err != nil && !strings.Contains(err.Error(), tc.wantErr) {
			t.Errorf("parseApproval(%q) = %v; want %q", tc.v, err, tc.wantErr)
		}
	}
}

// withApproval returns pod with the annotation set to v ("-": none).
func withApproval(pod *v1.Pod, v string) *v1.Pod {
	pod = pod.DeepCopy()
	if v != "-" {
		pod.Annotations[ApprovedReachAnnotation] = v
	}
	return pod
}

func TestCheckReach(t *testing.T) {
	created := `{"app": {"livenessProbe": {"exec": {"command": ["cat", "/tmp/healthy"]}}, "readinessProbe": {"httpGet": {"port": 80}}}}`
	approval := approve(t, created)
	edited := `{"app": {"livenessProbe": {"exec": {"command": ["cat", "/tmp/healthy"]}, "periodSeconds": 1}, ` +
		`"readinessProbe": {"exec": {"command": ["sh", "-c", "cat /var/run/secrets/kubernetes.io/serviceaccount/token"]}}, ` +
		`"startupProbe": {"httpGet": {"port": 80, "host": "169.254.169.254"}}}}`
	const changed = `Forbidden: changed after the pod was created without pods/exec approval: probed.io/approved-reach does not cover what this probe runs or where it connects (a user allowed to create pods/exec on the pod must approve it)`
	for _, tc := range []struct {
		name     string
		pod      *v1.Pod
		require  bool
		kept     []string
		problems []string
	}{
		{"as created", withApproval(testPod(created), approval), false, []string{"app/Liveness/ann", "app/Readiness/ann"}, nil},
		{"edited", withApproval(testPod(edited), approval), false, []string{"app/Liveness/ann"}, []string{
			`container "app" readinessProbe: exec.command: ` + changed,
			`container "app" startupProbe: httpGet.host, httpGet.port, httpGet.path, httpGet.scheme: ` + changed,
		}},
		{"no approval: the admission policy guards it", withApproval(testPod(edited), "-"), false, []string{"app/Liveness/ann", "app/Readiness/ann", "app/Startup/ann"}, nil},
		{"no approval, required", withApproval(testPod(created), "-"), true, []string{"app/Readiness/ann"}, []string{
			`container "app" livenessProbe: exec.command: Forbidden: the pod has no probed.io/approved-reach, and this node runs with --require-approved-reach: a user allowed to create pods/exec on the pod must approve what this probe runs or where it connects`,
		}},
		{"malformed approval", withApproval(testPod(created), "v1,app/livenessProbe=x"), false, []string{"app/Readiness/ann"}, []string{
			`container "app" livenessProbe: exec.command: Forbidden: probed.io/approved-reach is malformed (entry "app/livenessProbe": the digest must be 64 lower-case hex digits), so it approves nothing`,
		}},
		{"approval of another container", withApproval(testPod(strings.Replace(created, `"app"`, `"web"`, 1)), approval), false, []string{"web/Readiness/ann"}, []string{
			`container "web" livenessProbe: exec.command: ` + changed,
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			declared, problems := DeclaredProbes(tc.pod, ProbeSourceAnnotation)
			if len(problems) > 0 {
				t.Fatalf("DeclaredProbes: %v", problems)
			}
			kept, problems := CheckReach(tc.pod, declared, nil, tc.require)
			if got := probeKeysOf(kept); !reflect.DeepEqual(got, tc.kept) {
				t.Errorf("kept %v; want %v", got, tc.kept)
			}
			if got := problemStrings(problems); !reflect.DeepEqual(got, tc.problems) {
				t.Errorf("problems:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(tc.problems, "\n"))
			}
		})
	}
}

// Should the annotation the probes were declared from not read for their
// reach, nothing is approved: the probes with reach are refused, not kept.
func TestCheckReachRefusesWhatItCannotRead(t *testing.T) {
	created := `{"app": {"livenessProbe": {"exec": {"command": ["cat", "/tmp/healthy"]}}}}`
	pod := withApproval(testPod(created), approve(t, created))
	declared, problems := DeclaredProbes(pod, ProbeSourceAnnotation)
	if len(problems) > 0 || len(declared) != 1 {
		t.Fatalf("DeclaredProbes: %v %v", declared, problems)
	}
	pod.Annotations[ProbesAnnotation] = "{not json"
	kept, problems := CheckReach(pod, declared, nil, false)
	if len(kept) != 0 || len(problems) != 1 || !strings.Contains(problems[0].String(), "could not be read") {
		t.Errorf("kept %v, problems %v; want the probe refused as unreadable", probeKeysOf(kept), problemStrings(problems))
	}
}

// Spec probes are the creator's and immutable: never judged, even beside
// an annotation under --probe-source=both.
func TestCheckReachLeavesSpecProbes(t *testing.T) {
	pod := withApproval(testPod(`{"app": {"readinessProbe": {"exec": {"command": ["new"]}}}}`), "v1")
	pod.Spec.Containers[1].LivenessProbe = &v1.Probe{ProbeHandler: v1.ProbeHandler{Exec: &v1.ExecAction{Command: []string{"spec"}}}}
	declared, _ := DeclaredProbes(pod, ProbeSourceBoth)
	kept, problems := CheckReach(pod, declared, nil, true)
	if got := probeKeysOf(kept); !reflect.DeepEqual(got, []string{"web/Liveness/spec"}) || len(problems) != 1 {
		t.Errorf("kept %v, problems %v; want the spec probe kept and the annotation's refused", got, problemStrings(problems))
	}
	spec := testPod("-")
	spec.Spec.Containers[0].LivenessProbe = &v1.Probe{ProbeHandler: v1.ProbeHandler{Exec: &v1.ExecAction{Command: []string{"spec"}}}}
	declared, _ = DeclaredProbes(spec, ProbeSourceSpec)
	if kept, problems := CheckReach(spec, declared, nil, true); len(kept) != 1 || len(problems) != 0 {
		t.Errorf("--probe-source=spec: kept %v, problems %v", probeKeysOf(kept), problemStrings(problems))
	}
}

func TestUnapprovedReachEdits(t *testing.T) {
	created := `{"app": {"livenessProbe": {"exec": {"command": ["cat", "/tmp/healthy"]}}, "readinessProbe": {"httpGet": {"port": 80}}}}`
	approval := approve(t, created)
	old := withApproval(testPod(created), approval)
	for _, tc := range []struct {
		name string
		new  *v1.Pod
		want []string
	}{
		{"free edits", withApproval(testPod(`{"app": {"livenessProbe": {"exec": {"command": ["cat", "/tmp/healthy"]}, "periodSeconds": 2}, "readinessProbe": {"httpGet": {"port": "http", "path": "/x"}}}}`), approval), nil},
		{"exec changed and added", withApproval(testPod(`{"app": {"livenessProbe": {"exec": {"command": ["id"]}}, "readinessProbe": {"exec": {"command": ["id"]}}}}`), approval), []string{
			`container "app" livenessProbe: exec.command: Forbidden: changing what a probe runs or where it connects needs create on pods/exec for this pod, as kubectl exec does`,
			`container "app" readinessProbe: exec.command: Forbidden: changing what a probe runs or where it connects needs create on pods/exec for this pod, as kubectl exec does`,
		}},
		{"approved in the same request", func() *v1.Pod {
			ann := `{"app": {"livenessProbe": {"exec": {"command": ["id"]}}}}`
			return withApproval(testPod(ann), approve(t, ann))
		}(), nil},
		{"narrowed", withApproval(testPod(`{"app": {"livenessProbe": {"tcpSocket": {"port": 80}}}}`), approval), nil},
		{"no approval: the old probe is the reference", withApproval(testPod(`{"app": {"livenessProbe": {"exec": {"command": ["cat", "/tmp/healthy"]}}, "startupProbe": {"tcpSocket": {"port": 1, "host": "h"}}}}`), "-"), []string{
			`container "app" startupProbe: tcpSocket.host, tcpSocket.port: Forbidden: changing what a probe runs or where it connects needs create on pods/exec for this pod, as kubectl exec does`,
		}},
		{"malformed approval approves nothing new", withApproval(testPod(`{"app": {"livenessProbe": {"exec": {"command": ["cat", "/tmp/healthy"]}}, "startupProbe": {"exec": {"command": ["x"]}}}}`), "v1,junk"), []string{
			`container "app" startupProbe: exec.command: Forbidden: changing what a probe runs or where it connects needs create on pods/exec for this pod, as kubectl exec does`,
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := UnapprovedReachEdits(old, tc.new)
			if err != nil {
				t.Fatal(err)
			}
			if s := problemStrings(got); !reflect.DeepEqual(s, tc.want) {
				t.Errorf("edits:\n%s\nwant:\n%s", strings.Join(s, "\n"), strings.Join(tc.want, "\n"))
			}
		})
	}
	if _, err := UnapprovedReachEdits(old, testPod(`{`)); err == nil {
		t.Error("a malformed new annotation: no error")
	}
}

// Every field an annotation probe can carry is either free or reach, on
// purpose: a field added to the decoder, or to k8s.io/api's Probe, counts
// as reach until it is added here (and to clearFree).
func TestReachClassifiesEveryField(t *testing.T) {
	// Path, port and scheme are free only on the pod's own IP, with no
	// host, Host header or body check (clearFree; TestReAimingNeedsExec).
	free := map[string]bool{
		"Probe.InitialDelaySeconds": true, "Probe.TimeoutSeconds": true, "Probe.PeriodSeconds": true,
		"Probe.SuccessThreshold": true, "Probe.FailureThreshold": true, "Probe.TerminationGracePeriodSeconds": true,
		"HTTPGetAction.Path": true, "HTTPGetAction.Port": true, "HTTPGetAction.Scheme": true, "HTTPGetAction.Protocol": true,
		"TCPSocketAction.Port": true, "GRPCAction.Port": true, "GRPCAction.Service": true, "GRPCAction.Mode": true,
		"annotatedProbe.KeepAlive": true, "annotatedProbe.ExpectStatus": true,
		"annotatedProbe.PeriodMs": true, "annotatedProbe.TimeoutMs": true,
		// probed.io/tls only narrows what passes, but for the credential.
		"tlsField.ServerName": true, "tlsField.CA": true, "tlsField.Roots": true, "tlsField.InsecureSkipVerify": true,
	}
	reach := map[string]bool{
		"ExecAction.Command": true, "HTTPGetAction.Host": true, "HTTPGetAction.HTTPHeaders": true,
		"TCPSocketAction.Host": true, "annotatedProbe.ExpectBody": true,
		"tlsField.ClientCertificate": true,
		// Sent as the pod, to what listens only on its loopback.
		"annotatedProbe.From": true,
	}
	var walk func(typ reflect.Type)
	walk = func(typ reflect.Type) {
		for i := range typ.NumField() {
			f := typ.Field(i)
			name := typ.Name() + "." + f.Name
			switch {
			case name == "annotatedProbe.Probe" || name == "Probe.ProbeHandler":
				walk(f.Type)
			case name == "annotatedProbe.TLS":
				walk(f.Type.Elem())
			case typ.Name() == "ProbeHandler":
				walk(f.Type.Elem())
			case free[name] == reach[name]:
				t.Errorf("%s is neither free nor reach (or both): decide, in clearFree and in this test", name)
			}
		}
	}
	walk(reflect.TypeOf(annotatedProbe{}))
}
