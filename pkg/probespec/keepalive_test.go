package probespec

import (
	"reflect"
	"testing"
)

func TestDeclaredProbesKeepAlive(t *testing.T) {
	for _, tc := range []struct {
		name      string
		ann       string
		wantKeep  bool
		wantProbs []string
	}{
		{"absent", annotationOf("app", "readinessProbe", `{"httpGet": {"port": 80, "path": "/"}}`), false, nil},
		{"httpGet true", annotationOf("app", "readinessProbe", `{"httpGet": {"port": 80, "path": "/"}, "probed.io/keepAlive": true}`), true, nil},
		{"grpc true", annotationOf("app", "livenessProbe", `{"grpc": {"port": 9090}, "probed.io/keepAlive": true}`), true, nil},
		{"httpGet false", annotationOf("app", "readinessProbe", `{"httpGet": {"port": 80, "path": "/"}, "probed.io/keepAlive": false}`), false, nil},
		{"tcpSocket false", annotationOf("app", "readinessProbe", `{"tcpSocket": {"port": 80}, "probed.io/keepAlive": false}`), false, nil},
		{"yaml", "app:\n  readinessProbe:\n    httpGet: {port: 80, path: /}\n    probed.io/keepAlive: true\n", true, nil},
		{"tcpSocket true", annotationOf("app", "readinessProbe", `{"tcpSocket": {"port": 80}, "probed.io/keepAlive": true}`), false,
			[]string{`container "app" readinessProbe: probed.io/keepAlive: Invalid value: true: only httpGet and grpc probes can keep their connection alive`}},
		{"exec true", annotationOf("app", "livenessProbe", `{"exec": {"command": ["true"]}, "probed.io/keepAlive": true}`), false,
			[]string{`container "app" livenessProbe: probed.io/keepAlive: Invalid value: true: only httpGet and grpc probes can keep their connection alive`}},
		{"not a boolean", annotationOf("app", "readinessProbe", `{"httpGet": {"port": 80, "path": "/"}, "probed.io/keepAlive": "yes"}`), false,
			[]string{`annotation "probed.io/probes": app.readinessProbe: cannot unmarshal string into Go struct field Probe.probed.io/keepAlive of type bool`}},
		{"duplicate", `{"app": {"readinessProbe": {"httpGet": {"port": 80, "path": "/"}, "probed.io/keepAlive": true, "probed.io/keepAlive": false}}}`, false,
			[]string{`annotation "probed.io/probes": app.readinessProbe: duplicate field "probed.io/keepAlive"`}},
		{"case matters", annotationOf("app", "readinessProbe", `{"httpGet": {"port": 80, "path": "/"}, "probed.io/keepalive": true}`), false,
			[]string{`annotation "probed.io/probes": app.readinessProbe: unknown field "probed.io/keepalive"`}},
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
			if probes[0].KeepAlive != tc.wantKeep {
				t.Errorf("KeepAlive = %v; want %v", probes[0].KeepAlive, tc.wantKeep)
			}
		})
	}
}
