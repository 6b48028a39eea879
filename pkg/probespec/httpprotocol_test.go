package probespec

import (
	"reflect"
	"testing"

	v1 "k8s.io/api/core/v1"
)

// TestDeclaredProbesHTTPProtocol: httpGet.protocol (KEP-5999, alpha in
// 1.37) with the API's values, rules and texts (validateHTTPGetAction in
// k8s.io/kubernetes v1.37.2): HTTP2 is h2c, so only with scheme HTTP and
// no host.
func TestDeclaredProbesHTTPProtocol(t *testing.T) {
	for _, tc := range []struct {
		name      string
		probe     string
		want      *v1.HTTPProtocol
		wantProbs []string
	}{
		{"absent", `{"httpGet": {"port": 80}}`, nil, nil},
		{"HTTP1", `{"httpGet": {"port": 80, "protocol": "HTTP1"}}`, ptr(v1.HTTPProtocolHTTP1), nil},
		{"HTTP2", `{"httpGet": {"port": 80, "protocol": "HTTP2"}}`, ptr(v1.HTTPProtocolHTTP2), nil},
		{"HTTP2, scheme HTTP", `{"httpGet": {"port": 80, "scheme": "HTTP", "protocol": "HTTP2"}}`, ptr(v1.HTTPProtocolHTTP2), nil},
		{"HTTP1 over HTTPS", `{"httpGet": {"port": 443, "scheme": "HTTPS", "protocol": "HTTP1"}}`, ptr(v1.HTTPProtocolHTTP1), nil},
		{"unsupported", `{"httpGet": {"port": 80, "protocol": "HTTP3"}}`, nil,
			[]string{`container "app" readinessProbe: httpGet.protocol: Unsupported value: "HTTP3": supported values: "HTTP1", "HTTP2"`}},
		{"case matters", `{"httpGet": {"port": 80, "protocol": "http2"}}`, nil,
			[]string{`container "app" readinessProbe: httpGet.protocol: Unsupported value: "http2": supported values: "HTTP1", "HTTP2"`}},
		{"HTTP2 over HTTPS", `{"httpGet": {"port": 443, "scheme": "HTTPS", "protocol": "HTTP2"}}`, nil,
			[]string{`container "app" readinessProbe: httpGet.protocol: Invalid value: "HTTP2": is only supported with HTTP (H2C)`}},
		{"HTTP2 with a host", `{"httpGet": {"port": 80, "host": "10.0.0.7", "protocol": "HTTP2"}}`, nil,
			[]string{`container "app" readinessProbe: httpGet.host: Invalid value: "10.0.0.7": must be empty when ` + "`protocol`" + ` is "HTTP2"`}},
		{"not in tcpSocket", `{"tcpSocket": {"port": 80, "protocol": "HTTP2"}}`, nil,
			[]string{`annotation "probed.io/probes": app.readinessProbe: unknown field "tcpSocket.protocol"`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			probes, problems := DeclaredProbes(testPod(annotationOf("app", "readinessProbe", tc.probe)), ProbeSourceAnnotation)
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
			if got := probes[0].Probe.HTTPGet.Protocol; !reflect.DeepEqual(got, tc.want) {
				t.Errorf("protocol = %v; want %v", got, tc.want)
			}
		})
	}
	// HTTP1 and no protocol are the same probe: an edit between them keeps the worker.
	a, _ := DeclaredProbes(testPod(annotationOf("app", "readinessProbe", `{"httpGet": {"port": 80}}`)), ProbeSourceAnnotation)
	b, _ := DeclaredProbes(testPod(annotationOf("app", "readinessProbe", `{"httpGet": {"port": 80, "protocol": "HTTP1"}}`)), ProbeSourceAnnotation)
	c, _ := DeclaredProbes(testPod(annotationOf("app", "readinessProbe", `{"httpGet": {"port": 80, "protocol": "HTTP2"}}`)), ProbeSourceAnnotation)
	if !ProbeSpecEqual(a[0].Probe, b[0].Probe) {
		t.Error("no protocol and HTTP1 differ")
	}
	if ProbeSpecEqual(a[0].Probe, c[0].Probe) {
		t.Error("HTTP2 is the same as no protocol")
	}
}

func ptr[T any](v T) *T { return &v }
