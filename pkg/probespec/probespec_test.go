package probespec

import (
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// testPod has, in spec order:
//
//	initContainers: "init" (plain), "sidecar" (restartPolicy Always, port admin=9000)
//	containers:     "app" (ports http=8080, grpc=9090, zero=0), "web" (no ports)
//	ephemeral:      "debug"
//
// annotation == "-" means no annotation at all.
func testPod(annotation string) *v1.Pod {
	always := v1.ContainerRestartPolicyAlways
	pod := &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "ns", UID: "uid-1"},
		Spec: v1.PodSpec{
			InitContainers: []v1.Container{
				{Name: "init"},
				{Name: "sidecar", RestartPolicy: &always, Ports: []v1.ContainerPort{{Name: "admin", ContainerPort: 9000}}},
			},
			Containers: []v1.Container{
				{Name: "app", Ports: []v1.ContainerPort{
					{Name: "http", ContainerPort: 8080},
					{Name: "grpc", ContainerPort: 9090},
					{Name: "zero", ContainerPort: 0},
				}},
				{Name: "web"},
			},
			EphemeralContainers: []v1.EphemeralContainer{{EphemeralContainerCommon: v1.EphemeralContainerCommon{Name: "debug"}}},
		},
	}
	if annotation != "-" {
		pod.Annotations = map[string]string{ProbesAnnotation: annotation}
	}
	return pod
}

// annotationOf builds an annotation declaring one probe.
func annotationOf(container, probeField, probeJSON string) string {
	return fmt.Sprintf(`{%q: {%q: %s}}`, container, probeField, probeJSON)
}

func problemStrings(ps []ProbeProblem) []string {
	var out []string
	for _, p := range ps {
		out = append(out, p.String())
	}
	return out
}

func toJSON(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

// probeKeyOf summarises a declared probe for order and source checks.
func probeKeyOf(d DeclaredProbe) string {
	src := "spec"
	if d.FromAnnotation {
		src = "ann"
	}
	return fmt.Sprintf("%s/%s/%s", d.Container.Name, d.Type, src)
}

func probeKeysOf(ds []DeclaredProbe) []string {
	var out []string
	for _, d := range ds {
		out = append(out, probeKeyOf(d))
	}
	return out
}

func ptrTo[T any](v T) *T { return &v }

func TestDeclaredProbesValidJSONAndYAML(t *testing.T) {
	// The contract's example, in JSON and in YAML, must give the same probes.
	wantReadiness := &v1.Probe{
		ProbeHandler:     v1.ProbeHandler{HTTPGet: &v1.HTTPGetAction{Path: "/ready", Port: intstr.FromString("http"), Scheme: v1.URISchemeHTTP}},
		PeriodSeconds:    2,
		TimeoutSeconds:   1,
		SuccessThreshold: 1,
		FailureThreshold: 3,
	}
	wantLiveness := &v1.Probe{
		ProbeHandler:     v1.ProbeHandler{Exec: &v1.ExecAction{Command: []string{"cat", "/tmp/healthy"}}},
		PeriodSeconds:    10,
		TimeoutSeconds:   1,
		SuccessThreshold: 1,
		FailureThreshold: 3,
	}
	wantStartup := &v1.Probe{
		ProbeHandler:     v1.ProbeHandler{TCPSocket: &v1.TCPSocketAction{Port: intstr.FromInt32(8080)}},
		PeriodSeconds:    10,
		TimeoutSeconds:   1,
		SuccessThreshold: 1,
		FailureThreshold: 30,
	}
	for _, tc := range []struct{ name, ann string }{
		{"json", `{"app": {
			"readinessProbe": {"httpGet": {"path": "/ready", "port": "http"}, "periodSeconds": 2},
			"livenessProbe":  {"exec": {"command": ["cat", "/tmp/healthy"]}, "failureThreshold": 3},
			"startupProbe":   {"tcpSocket": {"port": 8080}, "failureThreshold": 30}}}`},
		{"json with tabs", "{\n\t\"app\": {\n\t\t\"readinessProbe\": {\"httpGet\": {\"path\": \"/ready\", \"port\": \"http\"}, \"periodSeconds\": 2},\n\t\t\"livenessProbe\": {\"exec\": {\"command\": [\"cat\", \"/tmp/healthy\"]}},\n\t\t\"startupProbe\": {\"tcpSocket\": {\"port\": 8080}, \"failureThreshold\": 30}}}"},
		{"yaml block", `
app:
  readinessProbe:
    httpGet:
      path: /ready
      port: http
    periodSeconds: 2
  livenessProbe:
    exec:
      command: [cat, /tmp/healthy]
    failureThreshold: 3
  startupProbe:
    tcpSocket:
      port: 8080
    failureThreshold: 30
`},
		{"yaml with document start and comments", `---
# probes for app
app:
  livenessProbe: {exec: {command: ["cat", "/tmp/healthy"]}}
  readinessProbe: {httpGet: {path: /ready, port: http}, periodSeconds: 2}
  startupProbe: {tcpSocket: {port: 8080}, failureThreshold: 30}
...
`},
		{"yaml flow", `{app: {livenessProbe: {exec: {command: [cat, /tmp/healthy]}}, readinessProbe: {httpGet: {path: /ready, port: http}, periodSeconds: 2}, startupProbe: {tcpSocket: {port: 8080}, failureThreshold: 30}}}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, problems := DeclaredProbes(testPod(tc.ann), ProbeSourceAnnotation)
			if len(problems) != 0 {
				t.Fatalf("problems: %q", problemStrings(problems))
			}
			want := []*v1.Probe{wantLiveness, wantReadiness, wantStartup}
			types := []ProbeType{Liveness, Readiness, Startup}
			if len(got) != len(want) {
				t.Fatalf("got %d probes %q, want 3", len(got), probeKeysOf(got))
			}
			for i := range want {
				d := got[i]
				if d.Type != types[i] || d.Container.Name != "app" || d.InitContainer || !d.FromAnnotation {
					t.Errorf("probe %d = %s (init=%v)", i, probeKeyOf(d), d.InitContainer)
				}
				if !reflect.DeepEqual(d.Probe, want[i]) {
					t.Errorf("%s probe = %s\nwant %s", d.Type, toJSON(d.Probe), toJSON(want[i]))
				}
				if !reflect.DeepEqual(d.Container.Ports, testPod("-").Spec.Containers[0].Ports) {
					t.Errorf("container spec not carried: %+v", d.Container)
				}
			}
		})
	}
}

func TestDeclaredProbesDefaults(t *testing.T) {
	for _, tc := range []struct {
		name  string
		probe string
		check func(p *v1.Probe) any // returns the observed value
		want  any
	}{
		{"periodSeconds", `{"exec": {"command": ["x"]}}`, func(p *v1.Probe) any { return p.PeriodSeconds }, int32(10)},
		{"periodSeconds 0 means default", `{"exec": {"command": ["x"]}, "periodSeconds": 0}`, func(p *v1.Probe) any { return p.PeriodSeconds }, int32(10)},
		{"periodSeconds kept", `{"exec": {"command": ["x"]}, "periodSeconds": 7}`, func(p *v1.Probe) any { return p.PeriodSeconds }, int32(7)},
		{"timeoutSeconds", `{"exec": {"command": ["x"]}}`, func(p *v1.Probe) any { return p.TimeoutSeconds }, int32(1)},
		{"timeoutSeconds kept", `{"exec": {"command": ["x"]}, "timeoutSeconds": 5}`, func(p *v1.Probe) any { return p.TimeoutSeconds }, int32(5)},
		{"successThreshold", `{"exec": {"command": ["x"]}}`, func(p *v1.Probe) any { return p.SuccessThreshold }, int32(1)},
		{"successThreshold kept", `{"exec": {"command": ["x"]}, "successThreshold": 4}`, func(p *v1.Probe) any { return p.SuccessThreshold }, int32(4)},
		{"failureThreshold", `{"exec": {"command": ["x"]}}`, func(p *v1.Probe) any { return p.FailureThreshold }, int32(3)},
		{"failureThreshold kept", `{"exec": {"command": ["x"]}, "failureThreshold": 9}`, func(p *v1.Probe) any { return p.FailureThreshold }, int32(9)},
		{"initialDelaySeconds", `{"exec": {"command": ["x"]}}`, func(p *v1.Probe) any { return p.InitialDelaySeconds }, int32(0)},
		{"initialDelaySeconds kept", `{"exec": {"command": ["x"]}, "initialDelaySeconds": 15}`, func(p *v1.Probe) any { return p.InitialDelaySeconds }, int32(15)},
		{"terminationGracePeriodSeconds stays unset", `{"exec": {"command": ["x"]}}`, func(p *v1.Probe) any { return p.TerminationGracePeriodSeconds }, (*int64)(nil)},
		{"httpGet.path", `{"httpGet": {"port": 80}}`, func(p *v1.Probe) any { return p.HTTPGet.Path }, "/"},
		{"httpGet.path kept", `{"httpGet": {"port": 80, "path": "/healthz"}}`, func(p *v1.Probe) any { return p.HTTPGet.Path }, "/healthz"},
		{"httpGet.scheme", `{"httpGet": {"port": 80}}`, func(p *v1.Probe) any { return p.HTTPGet.Scheme }, v1.URISchemeHTTP},
		{"httpGet.scheme kept", `{"httpGet": {"port": 80, "scheme": "HTTPS"}}`, func(p *v1.Probe) any { return p.HTTPGet.Scheme }, v1.URISchemeHTTPS},
		{"httpGet.host stays empty", `{"httpGet": {"port": 80}}`, func(p *v1.Probe) any { return p.HTTPGet.Host }, ""},
		{"httpGet named port left as declared", `{"httpGet": {"port": "http"}}`, func(p *v1.Probe) any { return p.HTTPGet.Port }, intstr.FromString("http")},
		{"grpc.service becomes empty string", `{"grpc": {"port": 9090}}`, func(p *v1.Probe) any { return p.GRPC.Service }, ptrTo("")},
		{"grpc.service null becomes empty string", `{"grpc": {"port": 9090, "service": null}}`, func(p *v1.Probe) any { return p.GRPC.Service }, ptrTo("")},
		{"grpc.service kept", `{"grpc": {"port": 9090, "service": "liveness"}}`, func(p *v1.Probe) any { return p.GRPC.Service }, ptrTo("liveness")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ann := annotationOf("app", "readinessProbe", tc.probe)
			got, problems := DeclaredProbes(testPod(ann), ProbeSourceAnnotation)
			if len(problems) != 0 || len(got) != 1 {
				t.Fatalf("got %q, problems %q", probeKeysOf(got), problemStrings(problems))
			}
			if v := tc.check(got[0].Probe); !reflect.DeepEqual(v, tc.want) {
				t.Errorf("got %s, want %s", toJSON(v), toJSON(tc.want))
			}
		})
	}
}

func TestDeclaredProbesValidation(t *testing.T) {
	// want is the problem's String(); "" means the probe is valid.
	for _, tc := range []struct {
		name      string
		container string
		field     string
		probe     string
		want      []string
	}{
		// exactly one handler
		{"no handler", "app", "readinessProbe", `{"periodSeconds": 3}`,
			[]string{`container "app" readinessProbe: Required value: must specify a handler type`}},
		{"empty handlers are no handlers", "app", "readinessProbe", `{"exec": null, "httpGet": null}`,
			[]string{`container "app" readinessProbe: Required value: must specify a handler type`}},
		{"one handler", "app", "readinessProbe", `{"exec": {"command": ["true"]}}`, nil},
		{"two handlers", "app", "livenessProbe", `{"exec": {"command": ["true"]}, "tcpSocket": {"port": 80}}`,
			[]string{`container "app" livenessProbe: tcpSocket: Forbidden: may not specify more than 1 handler type`}},
		{"four handlers, first is validated", "app", "startupProbe", `{"exec": {}, "httpGet": {"port": 80}, "tcpSocket": {"port": 80}, "grpc": {"port": 80}}`,
			[]string{
				`container "app" startupProbe: exec.command: Required value`,
				`container "app" startupProbe: httpGet: Forbidden: may not specify more than 1 handler type`,
				`container "app" startupProbe: tcpSocket: Forbidden: may not specify more than 1 handler type`,
				`container "app" startupProbe: grpc: Forbidden: may not specify more than 1 handler type`,
			}},

		// exec
		{"exec.command empty", "app", "livenessProbe", `{"exec": {"command": []}}`,
			[]string{`container "app" livenessProbe: exec.command: Required value`}},
		{"exec.command missing", "app", "livenessProbe", `{"exec": {}}`,
			[]string{`container "app" livenessProbe: exec.command: Required value`}},

		// httpGet
		{"httpGet.port 0", "app", "readinessProbe", `{"httpGet": {"port": 0}}`,
			[]string{`container "app" readinessProbe: httpGet.port: Invalid value: 0: must be between 1 and 65535, inclusive`}},
		{"httpGet.port missing", "app", "readinessProbe", `{"httpGet": {"path": "/"}}`,
			[]string{`container "app" readinessProbe: httpGet.port: Invalid value: 0: must be between 1 and 65535, inclusive`}},
		{"httpGet.port 65536", "app", "readinessProbe", `{"httpGet": {"port": 65536}}`,
			[]string{`container "app" readinessProbe: httpGet.port: Invalid value: 65536: must be between 1 and 65535, inclusive`}},
		{"httpGet.port negative", "app", "readinessProbe", `{"httpGet": {"port": -1}}`,
			[]string{`container "app" readinessProbe: httpGet.port: Invalid value: -1: must be between 1 and 65535, inclusive`}},
		{"httpGet.port 1", "app", "readinessProbe", `{"httpGet": {"port": 1}}`, nil},
		{"httpGet.port 65535", "app", "readinessProbe", `{"httpGet": {"port": 65535}}`, nil},
		{"httpGet named port resolves", "app", "readinessProbe", `{"httpGet": {"port": "http"}}`, nil},
		{"httpGet named port resolves on a sidecar", "sidecar", "readinessProbe", `{"httpGet": {"port": "admin"}}`, nil},
		{"httpGet named port of another container", "web", "readinessProbe", `{"httpGet": {"port": "http"}}`,
			[]string{`container "web" readinessProbe: httpGet.port: Invalid value: "http": no container port named "http"`}},
		{"httpGet named port unknown", "app", "readinessProbe", `{"httpGet": {"port": "metrics"}}`,
			[]string{`container "app" readinessProbe: httpGet.port: Invalid value: "metrics": no container port named "metrics"`}},
		{"httpGet named port with a bad number", "app", "readinessProbe", `{"httpGet": {"port": "zero"}}`,
			[]string{`container "app" readinessProbe: httpGet.port: Invalid value: "zero": container port "zero" is 0: must be between 1 and 65535, inclusive`}},
		{"httpGet numeric-string port is a bad name, as in the API", "app", "readinessProbe", `{"httpGet": {"port": "8080"}}`,
			[]string{`container "app" readinessProbe: httpGet.port: Invalid value: "8080": must contain at least one letter (a-z)`}},
		{"httpGet port name upper case", "app", "readinessProbe", `{"httpGet": {"port": "HTTP"}}`,
			[]string{`container "app" readinessProbe: httpGet.port: Invalid value: "HTTP": must contain only alpha-numeric characters (a-z, 0-9), and hyphens (-)`,
				`container "app" readinessProbe: httpGet.port: Invalid value: "HTTP": must contain at least one letter (a-z)`}},
		{"httpGet port name too long", "app", "readinessProbe", `{"httpGet": {"port": "abcdefghijklmnop"}}`,
			[]string{`container "app" readinessProbe: httpGet.port: Invalid value: "abcdefghijklmnop": must be no more than 15 characters`}},
		{"httpGet port name double hyphen", "app", "readinessProbe", `{"httpGet": {"port": "a--b"}}`,
			[]string{`container "app" readinessProbe: httpGet.port: Invalid value: "a--b": must not contain consecutive hyphens`}},
		{"httpGet port name empty", "app", "readinessProbe", `{"httpGet": {"port": ""}}`,
			[]string{`container "app" readinessProbe: httpGet.port: Invalid value: "": must contain only alpha-numeric characters (a-z, 0-9), and hyphens (-)`,
				`container "app" readinessProbe: httpGet.port: Invalid value: "": must contain at least one letter (a-z)`}},
		{"httpGet.scheme lower case", "app", "readinessProbe", `{"httpGet": {"port": 80, "scheme": "http"}}`,
			[]string{`container "app" readinessProbe: httpGet.scheme: Unsupported value: "http": supported values: "HTTP", "HTTPS"`}},
		{"httpGet.scheme HTTPS", "app", "readinessProbe", `{"httpGet": {"port": 80, "scheme": "HTTPS"}}`, nil},
		{"httpGet header name invalid", "app", "readinessProbe", `{"httpGet": {"port": 80, "httpHeaders": [{"name": "X-Ok", "value": "1"}, {"name": "bad header", "value": "2"}]}}`,
			[]string{`container "app" readinessProbe: httpGet.httpHeaders[1].name: Invalid value: "bad header": a valid HTTP header must consist of alphanumeric characters or '-' (e.g. 'X-Header-Name', regex used for validation is '[-A-Za-z0-9]+')`}},
		{"httpGet header name empty", "app", "readinessProbe", `{"httpGet": {"port": 80, "httpHeaders": [{"name": ""}]}}`,
			[]string{`container "app" readinessProbe: httpGet.httpHeaders[0].name: Invalid value: "": a valid HTTP header must consist of alphanumeric characters or '-' (e.g. 'X-Header-Name', regex used for validation is '[-A-Za-z0-9]+')`}},
		{"httpGet header names valid", "app", "readinessProbe", `{"httpGet": {"port": 80, "host": "127.0.0.1", "httpHeaders": [{"name": "Host", "value": "x"}, {"name": "X-Ok"}]}}`, nil},

		// tcpSocket
		{"tcpSocket.port 0", "app", "livenessProbe", `{"tcpSocket": {"port": 0}}`,
			[]string{`container "app" livenessProbe: tcpSocket.port: Invalid value: 0: must be between 1 and 65535, inclusive`}},
		{"tcpSocket.port 70000", "app", "livenessProbe", `{"tcpSocket": {"port": 70000}}`,
			[]string{`container "app" livenessProbe: tcpSocket.port: Invalid value: 70000: must be between 1 and 65535, inclusive`}},
		{"tcpSocket numeric port", "app", "livenessProbe", `{"tcpSocket": {"port": 5432}}`, nil},
		{"tcpSocket named port resolves", "app", "livenessProbe", `{"tcpSocket": {"port": "grpc"}}`, nil},
		{"tcpSocket named port unknown", "app", "livenessProbe", `{"tcpSocket": {"port": "db"}}`,
			[]string{`container "app" livenessProbe: tcpSocket.port: Invalid value: "db": no container port named "db"`}},
		{"tcpSocket port name invalid", "app", "livenessProbe", `{"tcpSocket": {"port": "-db"}}`,
			[]string{`container "app" livenessProbe: tcpSocket.port: Invalid value: "-db": must not begin or end with a hyphen`}},

		// grpc
		{"grpc.port 0", "app", "livenessProbe", `{"grpc": {"port": 0}}`,
			[]string{`container "app" livenessProbe: grpc.port: Invalid value: 0: must be between 1 and 65535, inclusive`}},
		{"grpc.port 65536", "app", "livenessProbe", `{"grpc": {"port": 65536}}`,
			[]string{`container "app" livenessProbe: grpc.port: Invalid value: 65536: must be between 1 and 65535, inclusive`}},
		{"grpc.port valid", "app", "livenessProbe", `{"grpc": {"port": 9090, "service": "x"}}`, nil},

		// non-negative numbers (0 is defaulted, so it passes)
		{"initialDelaySeconds negative", "app", "readinessProbe", `{"exec": {"command": ["x"]}, "initialDelaySeconds": -1}`,
			[]string{`container "app" readinessProbe: initialDelaySeconds: Invalid value: -1: must be greater than or equal to 0`}},
		{"initialDelaySeconds 0", "app", "readinessProbe", `{"exec": {"command": ["x"]}, "initialDelaySeconds": 0}`, nil},
		{"timeoutSeconds negative", "app", "readinessProbe", `{"exec": {"command": ["x"]}, "timeoutSeconds": -2}`,
			[]string{`container "app" readinessProbe: timeoutSeconds: Invalid value: -2: must be greater than or equal to 0`}},
		{"timeoutSeconds 0", "app", "readinessProbe", `{"exec": {"command": ["x"]}, "timeoutSeconds": 0}`, nil},
		{"periodSeconds negative", "app", "readinessProbe", `{"exec": {"command": ["x"]}, "periodSeconds": -3}`,
			[]string{`container "app" readinessProbe: periodSeconds: Invalid value: -3: must be greater than or equal to 0`}},
		{"periodSeconds 1", "app", "readinessProbe", `{"exec": {"command": ["x"]}, "periodSeconds": 1}`, nil},
		{"successThreshold negative on readiness", "app", "readinessProbe", `{"exec": {"command": ["x"]}, "successThreshold": -1}`,
			[]string{`container "app" readinessProbe: successThreshold: Invalid value: -1: must be greater than or equal to 0`}},
		{"failureThreshold negative", "app", "readinessProbe", `{"exec": {"command": ["x"]}, "failureThreshold": -4}`,
			[]string{`container "app" readinessProbe: failureThreshold: Invalid value: -4: must be greater than or equal to 0`}},
		{"failureThreshold 1", "app", "readinessProbe", `{"exec": {"command": ["x"]}, "failureThreshold": 1}`, nil},
		{"several numbers at once, in the API's order", "app", "readinessProbe", `{"exec": {"command": ["x"]}, "failureThreshold": -1, "initialDelaySeconds": -1}`,
			[]string{`container "app" readinessProbe: initialDelaySeconds: Invalid value: -1: must be greater than or equal to 0`,
				`container "app" readinessProbe: failureThreshold: Invalid value: -1: must be greater than or equal to 0`}},

		// successThreshold must be 1 for liveness and startup
		{"successThreshold 2 on liveness", "app", "livenessProbe", `{"exec": {"command": ["x"]}, "successThreshold": 2}`,
			[]string{`container "app" livenessProbe: successThreshold: Invalid value: 2: must be 1`}},
		{"successThreshold 2 on startup", "app", "startupProbe", `{"exec": {"command": ["x"]}, "successThreshold": 2}`,
			[]string{`container "app" startupProbe: successThreshold: Invalid value: 2: must be 1`}},
		{"successThreshold 2 on readiness", "app", "readinessProbe", `{"exec": {"command": ["x"]}, "successThreshold": 2}`, nil},
		{"successThreshold 1 on liveness", "app", "livenessProbe", `{"exec": {"command": ["x"]}, "successThreshold": 1}`, nil},
		{"successThreshold -1 on liveness", "app", "livenessProbe", `{"exec": {"command": ["x"]}, "successThreshold": -1}`,
			[]string{`container "app" livenessProbe: successThreshold: Invalid value: -1: must be greater than or equal to 0`,
				`container "app" livenessProbe: successThreshold: Invalid value: -1: must be 1`}},

		// terminationGracePeriodSeconds: liveness and startup only, >= 1
		{"terminationGracePeriodSeconds on liveness", "app", "livenessProbe", `{"exec": {"command": ["x"]}, "terminationGracePeriodSeconds": 5}`, nil},
		{"terminationGracePeriodSeconds on startup", "app", "startupProbe", `{"exec": {"command": ["x"]}, "terminationGracePeriodSeconds": 1}`, nil},
		{"terminationGracePeriodSeconds 0", "app", "livenessProbe", `{"exec": {"command": ["x"]}, "terminationGracePeriodSeconds": 0}`,
			[]string{`container "app" livenessProbe: terminationGracePeriodSeconds: Invalid value: 0: must be greater than 0`}},
		{"terminationGracePeriodSeconds negative", "app", "startupProbe", `{"exec": {"command": ["x"]}, "terminationGracePeriodSeconds": -5}`,
			[]string{`container "app" startupProbe: terminationGracePeriodSeconds: Invalid value: -5: must be greater than 0`}},
		{"terminationGracePeriodSeconds on readiness", "app", "readinessProbe", `{"exec": {"command": ["x"]}, "terminationGracePeriodSeconds": 5}`,
			[]string{`container "app" readinessProbe: terminationGracePeriodSeconds: Invalid value: 5: must not be set for readinessProbes`}},
		{"terminationGracePeriodSeconds 0 on readiness", "app", "readinessProbe", `{"exec": {"command": ["x"]}, "terminationGracePeriodSeconds": 0}`,
			[]string{`container "app" readinessProbe: terminationGracePeriodSeconds: Invalid value: 0: must be greater than 0`,
				`container "app" readinessProbe: terminationGracePeriodSeconds: Invalid value: 0: must not be set for readinessProbes`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// A valid probe on another container must survive whatever this one is.
			ann := fmt.Sprintf(`{%q: {%q: %s}, "web": {"livenessProbe": {"tcpSocket": {"port": 80}}}}`, tc.container, tc.field, tc.probe)
			if tc.container == "web" {
				ann = annotationOf("web", tc.field, tc.probe)
			}
			got, problems := DeclaredProbes(testPod(ann), ProbeSourceAnnotation)
			if g := problemStrings(problems); !reflect.DeepEqual(g, tc.want) {
				t.Fatalf("problems:\n got %q\nwant %q", g, tc.want)
			}
			wantProbes := 1
			if tc.want != nil {
				wantProbes = 0
			}
			if tc.container != "web" {
				wantProbes++
				if last := got[len(got)-1]; probeKeyOf(last) != "web/Liveness/ann" {
					t.Errorf("the other container's valid probe is missing: %q", probeKeysOf(got))
				}
			}
			if len(got) != wantProbes {
				t.Fatalf("got probes %q, want %d", probeKeysOf(got), wantProbes)
			}
			for _, p := range problems {
				if p.Container != tc.container || p.Type == nil || probeFieldName(*p.Type) != tc.field || !p.FromAnnotation {
					t.Errorf("problem %+v does not name %s %s", p, tc.container, tc.field)
				}
			}
		})
	}
}

func TestValidateProbeRequiresHTTPPath(t *testing.T) {
	// Defaulting always sets a path, so only an undefaulted probe shows the API's rule.
	p := &v1.Probe{ProbeHandler: v1.ProbeHandler{HTTPGet: &v1.HTTPGetAction{Port: intstr.FromInt32(80), Scheme: v1.URISchemeHTTP}},
		PeriodSeconds: 10, TimeoutSeconds: 1, SuccessThreshold: 1, FailureThreshold: 3}
	errs := validateProbe(p, Readiness, &v1.Container{Name: "app"})
	if len(errs) != 1 || errs[0].Error() != "readinessProbe.httpGet.path: Required value" {
		t.Fatalf("errs = %v", errs)
	}
	p.HTTPGet.Port = intstr.IntOrString{Type: 7}
	p.HTTPGet.Path = "/"
	errs = validateProbe(p, Readiness, &v1.Container{Name: "app"})
	if len(errs) != 1 || !strings.Contains(errs[0].Error(), "unknown port type 7") {
		t.Fatalf("errs = %v", errs)
	}
}

func TestDeclaredProbesMalformedAnnotation(t *testing.T) {
	// The pod spec declares a readiness probe on web, so "both" has something to fall back on.
	withSpec := func(ann string) *v1.Pod {
		pod := testPod(ann)
		pod.Spec.Containers[1].ReadinessProbe = &v1.Probe{ProbeHandler: v1.ProbeHandler{TCPSocket: &v1.TCPSocketAction{Port: intstr.FromInt32(80)}}}
		return pod
	}
	for _, tc := range []struct {
		name, ann string
		want      string // the problem's String()
	}{
		{"not JSON or YAML", `app: [unclosed`,
			`annotation "probed.io/probes": not valid JSON or YAML: yaml: line 1: did not find expected ',' or ']'`},
		{"broken JSON", `{"app": {"readinessProbe": {"exec": {"command": ["x"]}}}`,
			`annotation "probed.io/probes": not valid JSON (unexpected end of JSON input at byte 56) or YAML (yaml: line 1: did not find expected ',' or '}')`},
		{"tab-indented YAML", "app:\n\treadinessProbe: {}",
			`annotation "probed.io/probes": not valid JSON or YAML: yaml: line 2: found character that cannot start any token`},
		{"an array", `[{"app": {}}]`,
			`annotation "probed.io/probes": must be an object keyed by container name, not an array`},
		{"a string", `"app"`,
			`annotation "probed.io/probes": must be an object keyed by container name, not a string`},
		{"a YAML scalar", `just some words`,
			`annotation "probed.io/probes": must be an object keyed by container name, not a string`},
		{"a number", `42`,
			`annotation "probed.io/probes": must be an object keyed by container name, not a number`},
		{"a boolean", `true`,
			`annotation "probed.io/probes": must be an object keyed by container name, not a boolean`},
		{"container value is an array", `{"app": ["readinessProbe"], "web": {"livenessProbe": {"tcpSocket": {"port": 80}}}}`,
			`annotation "probed.io/probes": app: must be an object with livenessProbe, readinessProbe or startupProbe, not an array`},
		{"probe value is a string", `{"app": {"readinessProbe": "httpGet"}}`,
			`annotation "probed.io/probes": app.readinessProbe: must be an object (a core/v1 Probe), not a string`},
		{"unknown probe type", `{"app": {"readinesProbe": {"exec": {"command": ["x"]}}}}`,
			`annotation "probed.io/probes": app: unknown field "readinesProbe": want livenessProbe, readinessProbe or startupProbe`},
		{"unknown probe field", `{"app": {"readinessProbe": {"exec": {"command": ["x"]}, "perodSeconds": 5}}}`,
			`annotation "probed.io/probes": app.readinessProbe: unknown field "perodSeconds"`},
		{"unknown nested field", `{"app": {"readinessProbe": {"httpGet": {"port": 80, "paht": "/"}}}}`,
			`annotation "probed.io/probes": app.readinessProbe: unknown field "httpGet.paht"`},
		{"field names are case-sensitive", `{"app": {"readinessProbe": {"exec": {"command": ["x"]}, "PeriodSeconds": 5}}}`,
			`annotation "probed.io/probes": app.readinessProbe: unknown field "PeriodSeconds"`},
		{"unknown field in YAML", "app:\n  livenessProbe:\n    exec: {command: [x]}\n    perodSeconds: 5\n",
			`annotation "probed.io/probes": app.livenessProbe: unknown field "perodSeconds"`},
		{"duplicate container", `{"app": {}, "app": {}}`,
			`annotation "probed.io/probes": duplicate field "app"`},
		{"duplicate probe type", `{"app": {"livenessProbe": {"exec": {"command": ["x"]}}, "livenessProbe": {"exec": {"command": ["y"]}}}}`,
			`annotation "probed.io/probes": app: duplicate field "livenessProbe"`},
		{"duplicate probe field", `{"app": {"livenessProbe": {"exec": {"command": ["x"]}, "periodSeconds": 1, "periodSeconds": 2}}}`,
			`annotation "probed.io/probes": app.livenessProbe: duplicate field "periodSeconds"`},
		{"duplicate key in YAML", "app: {}\napp: {}\n",
			`annotation "probed.io/probes": not valid JSON or YAML: yaml: unmarshal errors: line 2: key "app" already set in map`},
		{"number as string", `{"app": {"readinessProbe": {"exec": {"command": ["x"]}, "periodSeconds": "5"}}}`,
			`annotation "probed.io/probes": app.readinessProbe: cannot unmarshal string into Go struct field Probe.Probe.periodSeconds of type int32`},
		{"number too big", `{"app": {"readinessProbe": {"exec": {"command": ["x"]}, "periodSeconds": 4294967296}}}`,
			`annotation "probed.io/probes": app.readinessProbe: cannot unmarshal number 4294967296 into Go struct field Probe.Probe.periodSeconds of type int32`},
		{"fractional port", `{"app": {"readinessProbe": {"tcpSocket": {"port": 80.5}}}}`,
			`annotation "probed.io/probes": app.readinessProbe: cannot unmarshal number 80.5 into Go struct field TCPSocketAction.Probe.ProbeHandler.tcpSocket.port of type int32`},
		{"grpc.port is numeric only", `{"app": {"livenessProbe": {"grpc": {"port": "grpc"}}}}`,
			`annotation "probed.io/probes": app.livenessProbe: cannot unmarshal string into Go struct field GRPCAction.Probe.ProbeHandler.grpc.port of type int32`},
		{"command is not a list", `{"app": {"livenessProbe": {"exec": {"command": "cat /tmp/x"}}}}`,
			`annotation "probed.io/probes": app.livenessProbe: cannot unmarshal string into Go struct field ExecAction.Probe.ProbeHandler.exec.command of type []string`},
		{"several errors in one problem", `{"app": {"readinessProbe": {"perodSeconds": 5}, "livenesProbe": {}}, "web": {"startupProbe": []}}`,
			`annotation "probed.io/probes": app.readinessProbe: unknown field "perodSeconds"; app: unknown field "livenesProbe": want livenessProbe, readinessProbe or startupProbe; web.startupProbe: must be an object (a core/v1 Probe), not an array`},
		{"two YAML documents", "app:\n  livenessProbe: {exec: {command: [x]}}\n---\nweb: {}\n",
			`annotation "probed.io/probes": holds more than one YAML document`},
		{"content after a YAML document end", "app: {}\n...\nweb: {}\n",
			`annotation "probed.io/probes": holds more than one YAML document`},
		{"YAML keys that become one JSON key", `{1: {}, "1": []}`,
			`annotation "probed.io/probes": YAML keys "1", 1 read as the same key "1"`},
		{"YAML keys that become one JSON key, nested", "app:\n  readinessProbe: {exec: {command: [x]}, true: 1, \"true\": 2}\n",
			`annotation "probed.io/probes": app.readinessProbe: YAML keys "true", true read as the same key "true"`},
		{"YAML float keys that become one JSON key", "app: {livenessProbe: {exec: {command: [x]}}}\n1.0: {}\n1: {}\n",
			`annotation "probed.io/probes": YAML keys 1, 1.0 read as the same key "1"`},
		{"two YAML documents on marker lines", "--- {app: {}}\n--- {web: {}}\n",
			`annotation "probed.io/probes": holds more than one YAML document`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for _, src := range []ProbeSource{ProbeSourceAnnotation, ProbeSourceBoth} {
				got, problems := DeclaredProbes(withSpec(tc.ann), src)
				if g := problemStrings(problems); len(g) != 1 || g[0] != tc.want {
					t.Fatalf("%s: problems:\n got %q\nwant [%q]", src, g, tc.want)
				}
				if p := problems[0]; p.Container != "" || p.Type != nil || p.Field != "" || !p.FromAnnotation {
					t.Errorf("not a whole-annotation problem: %+v", p)
				}
				var want []string
				if src == ProbeSourceBoth {
					want = []string{"web/Readiness/spec"}
				}
				if g := probeKeysOf(got); !reflect.DeepEqual(g, want) {
					t.Errorf("%s: probes %q, want %q", src, g, want)
				}
			}
		})
	}
}

func TestDeclaredProbesDecodeErrorsAreCapped(t *testing.T) {
	var fields []string
	for i := range 20 {
		fields = append(fields, fmt.Sprintf(`"bad%02d": 1`, i))
	}
	ann := `{"app": {"readinessProbe": {` + strings.Join(fields, ",") + `}}}`
	_, problems := DeclaredProbes(testPod(ann), ProbeSourceAnnotation)
	if len(problems) != 1 {
		t.Fatalf("problems = %q", problemStrings(problems))
	}
	d := problems[0].Detail
	if n := strings.Count(d, "unknown field"); n != maxDecodeErrors || !strings.HasSuffix(d, "; and more") {
		t.Errorf("detail lists %d errors: %s", n, d)
	}
}

func TestDeclaredProbesDeclaresNothing(t *testing.T) {
	for _, tc := range []struct{ name, ann string }{
		{"no annotation", "-"},
		{"empty", ""},
		{"blank", " \n\t "},
		{"null", "null"},
		{"YAML null", "~"},
		{"empty object", "{}"},
		{"container with nothing", `{"app": {}}`},
		{"container null", `{"app": null}`},
		{"probe null", `{"app": {"readinessProbe": null}}`},
		{"YAML comment only", "# nothing yet\n"},
		{"YAML directive and document markers", "%YAML 1.1\n--- {app: {}}\n...\n# done\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for _, src := range []ProbeSource{ProbeSourceAnnotation, ProbeSourceSpec, ProbeSourceBoth} {
				got, problems := DeclaredProbes(testPod(tc.ann), src)
				if len(got) != 0 || len(problems) != 0 {
					t.Errorf("%s: got %q, problems %q", src, probeKeysOf(got), problemStrings(problems))
				}
			}
		})
	}
	if got, problems := DeclaredProbes(nil, ProbeSourceBoth); got != nil || problems != nil {
		t.Errorf("nil pod: %v %v", got, problems)
	}
}

func TestDeclaredProbesTargets(t *testing.T) {
	for _, tc := range []struct {
		name, ann    string
		wantProbes   []string
		wantProblems []string
	}{
		{"sidecar accepted",
			`{"sidecar": {"livenessProbe": {"tcpSocket": {"port": "admin"}}, "readinessProbe": {"exec": {"command": ["x"]}}}}`,
			[]string{"sidecar/Liveness/ann", "sidecar/Readiness/ann"}, nil},
		{"unknown container, others still run",
			`{"db": {"readinessProbe": {"exec": {"command": ["x"]}}}, "app": {"readinessProbe": {"exec": {"command": ["x"]}}}}`,
			[]string{"app/Readiness/ann"},
			[]string{`annotation "probed.io/probes": container "db": Not found: no container or restartable init container of this name in the pod`}},
		{"plain init container",
			`{"init": {"startupProbe": {"exec": {"command": ["x"]}}}, "web": {"startupProbe": {"exec": {"command": ["x"]}}}}`,
			[]string{"web/Startup/ann"},
			[]string{`annotation "probed.io/probes": container "init": Forbidden: may not be set for init containers without restartPolicy=Always`}},
		{"ephemeral container",
			`{"debug": {"livenessProbe": {"exec": {"command": ["x"]}}}}`,
			nil,
			[]string{`annotation "probed.io/probes": container "debug": Forbidden: cannot be set for an Ephemeral Container`}},
		{"bad keys sorted by name, before probe problems",
			`{"zz": {}, "init": {}, "aa": {}, "app": {"readinessProbe": {}}}`,
			nil,
			[]string{
				`annotation "probed.io/probes": container "aa": Not found: no container or restartable init container of this name in the pod`,
				`annotation "probed.io/probes": container "init": Forbidden: may not be set for init containers without restartPolicy=Always`,
				`annotation "probed.io/probes": container "zz": Not found: no container or restartable init container of this name in the pod`,
				`container "app" readinessProbe: Required value: must specify a handler type`,
			}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, problems := DeclaredProbes(testPod(tc.ann), ProbeSourceAnnotation)
			if g := probeKeysOf(got); !reflect.DeepEqual(g, tc.wantProbes) {
				t.Errorf("probes %q, want %q", g, tc.wantProbes)
			}
			if g := problemStrings(problems); !reflect.DeepEqual(g, tc.wantProblems) {
				t.Errorf("problems:\n got %q\nwant %q", g, tc.wantProblems)
			}
			for _, d := range got {
				if d.InitContainer != (d.Container.Name == "sidecar") {
					t.Errorf("%s: InitContainer = %v", probeKeyOf(d), d.InitContainer)
				}
			}
		})
	}
}

func TestDeclaredProbesSources(t *testing.T) {
	exec := func(cmd string) *v1.Probe {
		return &v1.Probe{ProbeHandler: v1.ProbeHandler{Exec: &v1.ExecAction{Command: []string{cmd}}}}
	}
	specPod := func(ann string) *v1.Pod {
		pod := testPod(ann)
		pod.Spec.InitContainers[0].ReadinessProbe = exec("plain-init") // the API forbids it; never run
		pod.Spec.InitContainers[1].StartupProbe = exec("sidecar-spec")
		pod.Spec.Containers[0].LivenessProbe = exec("app-spec")
		pod.Spec.Containers[0].ReadinessProbe = exec("app-spec")
		pod.Spec.Containers[1].ReadinessProbe = &v1.Probe{ProbeHandler: v1.ProbeHandler{HTTPGet: &v1.HTTPGetAction{Port: intstr.FromString("nope")}}}
		pod.Spec.EphemeralContainers[0].ReadinessProbe = exec("ephemeral") // the API forbids it; never run
		return pod
	}
	ann := `{"app": {"readinessProbe": {"exec": {"command": ["app-ann"]}}, "startupProbe": {"exec": {"command": ["app-ann"]}}}}`
	invalidAnn := `{"app": {"livenessProbe": {"exec": {"command": ["app-ann"]}, "successThreshold": 3}}}`
	webSpecProblem := `container "web" readinessProbe: httpGet.port: Invalid value: "nope": no container port named "nope"`
	appAnnProblem := `container "app" livenessProbe: successThreshold: Invalid value: 3: must be 1`

	for _, tc := range []struct {
		name         string
		src          ProbeSource
		ann          string
		wantProbes   []string // container/type/source=command
		wantProblems []string
	}{
		{"annotation ignores the spec", ProbeSourceAnnotation, ann,
			[]string{"app/Readiness/ann=app-ann", "app/Startup/ann=app-ann"}, nil},
		{"zero source is annotation", "", ann,
			[]string{"app/Readiness/ann=app-ann", "app/Startup/ann=app-ann"}, nil},
		{"unknown source is annotation", "bogus", ann,
			[]string{"app/Readiness/ann=app-ann", "app/Startup/ann=app-ann"}, nil},
		{"spec ignores the annotation", ProbeSourceSpec, ann,
			[]string{"sidecar/Startup/spec=sidecar-spec", "app/Liveness/spec=app-spec", "app/Readiness/spec=app-spec"},
			[]string{webSpecProblem}},
		{"spec ignores a malformed annotation", ProbeSourceSpec, `{"app": [}`,
			[]string{"sidecar/Startup/spec=sidecar-spec", "app/Liveness/spec=app-spec", "app/Readiness/spec=app-spec"},
			[]string{webSpecProblem}},
		{"both: the annotation wins for the same container and type", ProbeSourceBoth, ann,
			[]string{"sidecar/Startup/spec=sidecar-spec", "app/Liveness/spec=app-spec", "app/Readiness/ann=app-ann", "app/Startup/ann=app-ann"},
			[]string{webSpecProblem}},
		{"both: an invalid annotation probe still wins", ProbeSourceBoth, invalidAnn,
			[]string{"sidecar/Startup/spec=sidecar-spec", "app/Readiness/spec=app-spec"},
			[]string{appAnnProblem, webSpecProblem}},
		{"both: the annotation fixes an invalid spec probe", ProbeSourceBoth, annotationOf("web", "readinessProbe", `{"exec": {"command": ["web-ann"]}}`),
			[]string{"sidecar/Startup/spec=sidecar-spec", "app/Liveness/spec=app-spec", "app/Readiness/spec=app-spec", "web/Readiness/ann=web-ann"},
			nil},
		{"both without annotation", ProbeSourceBoth, "-",
			[]string{"sidecar/Startup/spec=sidecar-spec", "app/Liveness/spec=app-spec", "app/Readiness/spec=app-spec"},
			[]string{webSpecProblem}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, problems := DeclaredProbes(specPod(tc.ann), tc.src)
			var keys []string
			for _, d := range got {
				keys = append(keys, probeKeyOf(d)+"="+d.Probe.Exec.Command[0])
				if d.Probe.PeriodSeconds != 10 || d.Probe.TimeoutSeconds != 1 || d.Probe.FailureThreshold != 3 {
					t.Errorf("%s not defaulted: %s", probeKeyOf(d), toJSON(d.Probe))
				}
			}
			if !reflect.DeepEqual(keys, tc.wantProbes) {
				t.Errorf("probes:\n got %q\nwant %q", keys, tc.wantProbes)
			}
			if g := problemStrings(problems); !reflect.DeepEqual(g, tc.wantProblems) {
				t.Errorf("problems:\n got %q\nwant %q", g, tc.wantProblems)
			}
			for _, p := range problems {
				if p.FromAnnotation != (p.Container == "app") {
					t.Errorf("problem %q: FromAnnotation = %v", p, p.FromAnnotation)
				}
			}
		})
	}
}

func TestDeclaredProbesOrder(t *testing.T) {
	always := v1.ContainerRestartPolicyAlways
	exec := &v1.Probe{ProbeHandler: v1.ProbeHandler{Exec: &v1.ExecAction{Command: []string{"x"}}}}
	pod := &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Annotations: map[string]string{ProbesAnnotation: `{
			"z-main": {"startupProbe": {"exec": {"command": ["x"]}}, "livenessProbe": {"exec": {"command": ["x"]}}},
			"b-side": {"readinessProbe": {"exec": {"command": ["x"]}}},
			"a-main": {"startupProbe": {"exec": {"command": ["x"]}}, "readinessProbe": {"exec": {"command": ["x"]}}},
			"c-side": {"readinessProbe": {"exec": {"command": ["x"]}}, "livenessProbe": {"exec": {"command": ["x"]}}}}`}},
		Spec: v1.PodSpec{
			InitContainers: []v1.Container{
				{Name: "c-side", RestartPolicy: &always},
				{Name: "setup"},
				{Name: "b-side", RestartPolicy: &always},
			},
			Containers: []v1.Container{
				{Name: "z-main", ReadinessProbe: exec},
				{Name: "a-main", LivenessProbe: exec},
			},
		},
	}
	want := []string{
		"c-side/Liveness/ann", "c-side/Readiness/ann",
		"b-side/Readiness/ann",
		"z-main/Liveness/ann", "z-main/Readiness/spec", "z-main/Startup/ann",
		"a-main/Liveness/spec", "a-main/Readiness/ann", "a-main/Startup/ann",
	}
	first, _ := DeclaredProbes(pod, ProbeSourceBoth)
	if g := probeKeysOf(first); !reflect.DeepEqual(g, want) {
		t.Fatalf("order:\n got %q\nwant %q", g, want)
	}
	for range 50 {
		again, _ := DeclaredProbes(pod, ProbeSourceBoth)
		if !reflect.DeepEqual(again, first) {
			t.Fatalf("not deterministic: %q", probeKeysOf(again))
		}
	}
}

func TestDeclaredProbesDuplicateContainerNamesFirstWins(t *testing.T) {
	// The API forbids duplicate names; if a pod has them anyway, the first target wins.
	always := v1.ContainerRestartPolicyAlways
	pod := &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Annotations: map[string]string{ProbesAnnotation: `{"x": {"readinessProbe": {"tcpSocket": {"port": "p"}}}}`}},
		Spec: v1.PodSpec{
			InitContainers: []v1.Container{{Name: "x", RestartPolicy: &always, Ports: []v1.ContainerPort{{Name: "p", ContainerPort: 1}}}},
			Containers:     []v1.Container{{Name: "x"}},
		},
	}
	got, problems := DeclaredProbes(pod, ProbeSourceAnnotation)
	if len(problems) != 0 || len(got) != 1 || !got[0].InitContainer {
		t.Fatalf("got %q (init=%v), problems %q", probeKeysOf(got), len(got) > 0 && got[0].InitContainer, problemStrings(problems))
	}
}

func TestDeclaredProbesCopies(t *testing.T) {
	pod := testPod(`{"app": {"readinessProbe": {"httpGet": {"port": "http", "httpHeaders": [{"name": "X-A", "value": "1"}]}}}}`)
	pod.Spec.Containers[0].LivenessProbe = &v1.Probe{ProbeHandler: v1.ProbeHandler{GRPC: &v1.GRPCAction{Port: 9090}}}
	before := pod.DeepCopy()
	got, problems := DeclaredProbes(pod, ProbeSourceBoth)
	if len(problems) != 0 || len(got) != 2 {
		t.Fatalf("got %q, problems %q", probeKeysOf(got), problemStrings(problems))
	}
	if !reflect.DeepEqual(pod, before) {
		t.Fatal("DeclaredProbes modified the pod (e.g. defaulted its spec probes)")
	}
	got[0].Probe.GRPC.Port = 1
	got[0].Container.Ports[0].ContainerPort = 1
	got[1].Probe.HTTPGet.HTTPHeaders[0].Value = "changed"
	if !reflect.DeepEqual(pod, before) {
		t.Fatal("returned probes share memory with the pod")
	}
	again, _ := DeclaredProbes(pod, ProbeSourceBoth)
	if again[1].Probe.HTTPGet.HTTPHeaders[0].Value != "1" {
		t.Fatal("a decoded probe is shared between calls")
	}
}

func TestParseProbeSource(t *testing.T) {
	for _, tc := range []struct {
		in      string
		want    ProbeSource
		wantErr bool
	}{
		{"", ProbeSourceAnnotation, false},
		{"annotation", ProbeSourceAnnotation, false},
		{"spec", ProbeSourceSpec, false},
		{"both", ProbeSourceBoth, false},
		{"Both", "", true},
		{"all", "", true},
		{" spec", "", true},
	} {
		got, err := ParseProbeSource(tc.in)
		if got != tc.want || (err != nil) != tc.wantErr {
			t.Errorf("ParseProbeSource(%q) = %q, %v", tc.in, got, err)
		}
		if err != nil && !strings.Contains(err.Error(), `"annotation", "spec" or "both"`) {
			t.Errorf("error does not list the valid values: %v", err)
		}
	}

	var s ProbeSource
	if s.String() != "annotation" || s.Type() != "probeSource" {
		t.Errorf("zero value: String %q Type %q", s.String(), s.Type())
	}
	if err := s.Set("both"); err != nil || s != ProbeSourceBoth || s.String() != "both" {
		t.Errorf("Set(both): %q, %v", s, err)
	}
	if err := s.Set("nope"); err == nil || s != ProbeSourceBoth {
		t.Errorf("Set(nope): %q, %v", s, err)
	}
}

func TestProbeProblemString(t *testing.T) {
	readiness := Readiness
	startup := Startup
	unknown := ProbeType(42)
	for _, tc := range []struct {
		p    ProbeProblem
		want string
	}{
		{ProbeProblem{Container: "app", Type: &readiness, Field: "httpGet.port", Detail: `Invalid value: "metrics": no container port named "metrics"`},
			`container "app" readinessProbe: httpGet.port: Invalid value: "metrics": no container port named "metrics"`},
		{ProbeProblem{Container: "app", Type: &startup, Detail: "Required value: must specify a handler type"},
			`container "app" startupProbe: Required value: must specify a handler type`},
		{ProbeProblem{Container: "db", Detail: "Not found: x"},
			`annotation "probed.io/probes": container "db": Not found: x`},
		{ProbeProblem{Detail: "must be an object keyed by container name, not an array"},
			`annotation "probed.io/probes": must be an object keyed by container name, not an array`},
		{ProbeProblem{Container: "c", Type: &unknown, Field: "f", Detail: "d"},
			`container "c" unknownProbe: f: d`},
	} {
		if got := tc.p.String(); got != tc.want {
			t.Errorf("got  %s\nwant %s", got, tc.want)
		}
	}
}

func TestProbeSpecEqual(t *testing.T) {
	base := func() *v1.Probe {
		return &v1.Probe{ProbeHandler: v1.ProbeHandler{HTTPGet: &v1.HTTPGetAction{Port: intstr.FromString("http")}}}
	}
	with := func(f func(*v1.Probe)) *v1.Probe { p := base(); f(p); return p }
	for _, tc := range []struct {
		name string
		a, b *v1.Probe
		want bool
	}{
		{"both nil", nil, nil, true},
		{"nil and not", nil, base(), false},
		{"not and nil", base(), nil, false},
		{"same", base(), base(), true},
		{"spelled-out defaults", base(), with(func(p *v1.Probe) {
			p.PeriodSeconds, p.TimeoutSeconds, p.SuccessThreshold, p.FailureThreshold = 10, 1, 1, 3
			p.HTTPGet.Path, p.HTTPGet.Scheme = "/", v1.URISchemeHTTP
		}), true},
		{"grpc nil and empty service", &v1.Probe{ProbeHandler: v1.ProbeHandler{GRPC: &v1.GRPCAction{Port: 1}}},
			&v1.Probe{ProbeHandler: v1.ProbeHandler{GRPC: &v1.GRPCAction{Port: 1, Service: ptrTo("")}}}, true},
		{"nil and empty headers", base(), with(func(p *v1.Probe) { p.HTTPGet.HTTPHeaders = []v1.HTTPHeader{} }), true},
		{"period changed", base(), with(func(p *v1.Probe) { p.PeriodSeconds = 2 }), false},
		{"path changed", base(), with(func(p *v1.Probe) { p.HTTPGet.Path = "/ready" }), false},
		{"named vs numeric port", base(), with(func(p *v1.Probe) { p.HTTPGet.Port = intstr.FromInt32(8080) }), false},
		{"grace period set", base(), with(func(p *v1.Probe) { p.TerminationGracePeriodSeconds = ptrTo(int64(5)) }), false},
		{"handler changed", base(), &v1.Probe{ProbeHandler: v1.ProbeHandler{TCPSocket: &v1.TCPSocketAction{Port: intstr.FromString("http")}}}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var ca, cb *v1.Probe
			if tc.a != nil {
				ca = tc.a.DeepCopy()
			}
			if tc.b != nil {
				cb = tc.b.DeepCopy()
			}
			if got := ProbeSpecEqual(tc.a, tc.b); got != tc.want {
				t.Errorf("ProbeSpecEqual = %v, want %v", got, tc.want)
			}
			if got := ProbeSpecEqual(tc.b, tc.a); got != tc.want {
				t.Errorf("not symmetric")
			}
			if !reflect.DeepEqual(ca, tc.a) || !reflect.DeepEqual(cb, tc.b) {
				t.Errorf("ProbeSpecEqual modified its arguments")
			}
		})
	}
}
