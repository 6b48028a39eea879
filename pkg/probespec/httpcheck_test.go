package probespec

import (
	"reflect"
	"regexp"
	"testing"
)

func TestDeclaredProbesHTTPCheck(t *testing.T) {
	const get = `"httpGet": {"port": 80, "path": "/"}`
	for _, tc := range []struct {
		name       string
		ann        string
		wantStatus []int
		wantBody   string
		wantProbs  []string
	}{
		{"absent", annotationOf("app", "readinessProbe", `{`+get+`}`), nil, "", nil},
		{"status", annotationOf("app", "readinessProbe", `{`+get+`, "probed.io/expectStatus": [200, 204]}`), []int{200, 204}, "", nil},
		{"body", annotationOf("app", "livenessProbe", `{`+get+`, "probed.io/expectBody": "^ok$"}`), nil, "^ok$", nil},
		{"both, yaml", "app:\n  startupProbe:\n    httpGet: {port: 80}\n    probed.io/expectStatus: [503]\n    probed.io/expectBody: 'up|UP'\n", []int{503}, "up|UP", nil},
		{"bad regexp", annotationOf("app", "readinessProbe", `{`+get+`, "probed.io/expectBody": "(ok"}`), nil, "",
			[]string{`container "app" readinessProbe: probed.io/expectBody: Invalid value: "(ok": must be an RE2 regular expression: error parsing regexp: missing closing ): ` + "`(ok`"}},
		{"perl only", annotationOf("app", "readinessProbe", `{`+get+`, "probed.io/expectBody": "(?=ok)"}`), nil, "",
			[]string{`container "app" readinessProbe: probed.io/expectBody: Invalid value: "(?=ok)": must be an RE2 regular expression: error parsing regexp: invalid or unsupported Perl syntax: ` + "`(?=`"}},
		{"status out of range", annotationOf("app", "readinessProbe", `{`+get+`, "probed.io/expectStatus": [200, 99, 600]}`), nil, "",
			[]string{
				`container "app" readinessProbe: probed.io/expectStatus[1]: Invalid value: 99: must be an HTTP status code, between 100 and 599, inclusive`,
				`container "app" readinessProbe: probed.io/expectStatus[2]: Invalid value: 600: must be an HTTP status code, between 100 and 599, inclusive`,
			}},
		{"status empty", annotationOf("app", "readinessProbe", `{`+get+`, "probed.io/expectStatus": []}`), nil, "",
			[]string{`container "app" readinessProbe: probed.io/expectStatus: Required value: must list at least one status code`}},
		{"status null is absent", annotationOf("app", "readinessProbe", `{`+get+`, "probed.io/expectStatus": null}`), nil, "", nil},
		{"status on tcpSocket", annotationOf("app", "readinessProbe", `{"tcpSocket": {"port": 80}, "probed.io/expectStatus": [200]}`), nil, "",
			[]string{`container "app" readinessProbe: probed.io/expectStatus: Invalid value: [200]: only httpGet probes can check the response status`}},
		{"body on grpc", annotationOf("app", "livenessProbe", `{"grpc": {"port": 9090}, "probed.io/expectBody": "ok"}`), nil, "",
			[]string{`container "app" livenessProbe: probed.io/expectBody: Invalid value: "ok": only httpGet probes can check the response body`}},
		{"body on exec", annotationOf("app", "livenessProbe", `{"exec": {"command": ["true"]}, "probed.io/expectBody": "ok"}`), nil, "",
			[]string{`container "app" livenessProbe: probed.io/expectBody: Invalid value: "ok": only httpGet probes can check the response body`}},
		{"status not numbers", annotationOf("app", "readinessProbe", `{`+get+`, "probed.io/expectStatus": ["200"]}`), nil, "",
			[]string{`annotation "probed.io/probes": app.readinessProbe: cannot unmarshal string into Go struct field Probe.probed.io/expectStatus of type int`}},
		// Item 4 of issue 20: a body check is an oracle for whatever body it
		// reads, so it may read only the pod's own answer.
		{"body with a host", annotationOf("app", "readinessProbe", `{"httpGet": {"port": 80, "host": "10.0.0.7"}, "probed.io/expectBody": "^ok"}`), nil, "",
			[]string{`container "app" readinessProbe: probed.io/expectBody: Forbidden: a body check may read only the pod's own answers: not with httpGet.host "10.0.0.7" (leave host empty: the probe then goes to the pod's IP)`}},
		{"body with a host name", "app:\n  livenessProbe:\n    httpGet: {port: 80, host: metadata.google.internal}\n    probed.io/expectBody: x\n", nil, "",
			[]string{`container "app" livenessProbe: probed.io/expectBody: Forbidden: a body check may read only the pod's own answers: not with httpGet.host "metadata.google.internal" (leave host empty: the probe then goes to the pod's IP)`}},
		{"status with a host is fine", annotationOf("app", "readinessProbe", `{"httpGet": {"port": 80, "host": "10.0.0.7"}, "probed.io/expectStatus": [204]}`), []int{204}, "", nil},
		{"case matters", annotationOf("app", "readinessProbe", `{`+get+`, "probed.io/expectbody": "ok"}`), nil, "",
			[]string{`annotation "probed.io/probes": app.readinessProbe: unknown field "probed.io/expectbody"`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			probes, problems := DeclaredProbes(testPod(tc.ann), ProbeSourceAnnotation)
			if got := problemStrings(problems); !reflect.DeepEqual(got, tc.wantProbs) {
				t.Fatalf("problems = %q; want %q", got, tc.wantProbs)
			}
			if tc.wantProbs != nil {
				if len(probes) != 0 {
					t.Fatalf("declared %v; want nothing", probeKeysOf(probes))
				}
				return
			}
			if len(probes) != 1 {
				t.Fatalf("declared %v; want one probe", probeKeysOf(probes))
			}
			c := probes[0].HTTPCheck
			if tc.wantStatus == nil && tc.wantBody == "" {
				if c != nil {
					t.Fatalf("HTTPCheck = %+v; want nil", c)
				}
				return
			}
			if c == nil {
				t.Fatal("HTTPCheck = nil")
			}
			if !reflect.DeepEqual(c.Status, tc.wantStatus) {
				t.Errorf("Status = %v; want %v", c.Status, tc.wantStatus)
			}
			if got := ""; c.Body != nil {
				got = c.Body.String()
				if got != tc.wantBody {
					t.Errorf("Body = %q; want %q", got, tc.wantBody)
				}
			} else if tc.wantBody != "" {
				t.Errorf("Body = nil; want %q", tc.wantBody)
			}
		})
	}
}

func TestSameExtensionsHTTPCheck(t *testing.T) {
	decl := func(extra string) DeclaredProbe {
		t.Helper()
		probes, problems := DeclaredProbes(testPod(annotationOf("app", "readinessProbe", `{"httpGet": {"port": 80}`+extra+`}`)), ProbeSourceAnnotation)
		if len(problems) > 0 || len(probes) != 1 {
			t.Fatalf("%q: %v %q", extra, probeKeysOf(probes), problemStrings(problems))
		}
		return probes[0]
	}
	base := decl(`, "probed.io/expectStatus": [200], "probed.io/expectBody": "ok"`)
	if !SameExtensions(base, decl(`, "probed.io/expectBody": "ok", "probed.io/expectStatus": [200]`)) {
		t.Error("the same checks differ")
	}
	for _, other := range []string{``, `, "probed.io/expectStatus": [200]`, `, "probed.io/expectStatus": [200], "probed.io/expectBody": "OK"`, `, "probed.io/expectStatus": [204], "probed.io/expectBody": "ok"`} {
		if SameExtensions(base, decl(other)) {
			t.Errorf("%q is the same as the base", other)
		}
	}
}

func TestHTTPCheckEqual(t *testing.T) {
	a := &HTTPCheck{Status: []int{200}, Body: regexp.MustCompile("ok")}
	for _, tc := range []struct {
		b    *HTTPCheck
		want bool
	}{
		{&HTTPCheck{Status: []int{200}, Body: regexp.MustCompile("ok")}, true},
		{&HTTPCheck{Status: []int{200}}, false},
		{&HTTPCheck{Status: []int{204}, Body: regexp.MustCompile("ok")}, false},
		{&HTTPCheck{Status: []int{200}, Body: regexp.MustCompile("ok$")}, false},
		{nil, false},
	} {
		if got := a.Equal(tc.b); got != tc.want {
			t.Errorf("Equal(%v) = %v; want %v", tc.b, got, tc.want)
		}
	}
	if !(*HTTPCheck)(nil).Equal(nil) {
		t.Error("nil != nil")
	}
}
