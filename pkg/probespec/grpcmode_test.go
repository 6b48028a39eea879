package probespec

import (
	"reflect"
	"testing"

	v1 "k8s.io/api/core/v1"
)

func TestDeclaredProbesGRPCMode(t *testing.T) {
	for _, tc := range []struct {
		name      string
		ann       string
		wantTLS   bool
		wantProbs []string
	}{
		{"absent", annotationOf("app", "livenessProbe", `{"grpc": {"port": 9090}}`), false, nil},
		{"TLS", annotationOf("app", "livenessProbe", `{"grpc": {"port": 9090, "mode": "TLS"}}`), true, nil},
		{"Plaintext", annotationOf("app", "readinessProbe", `{"grpc": {"port": 9090, "service": "s", "mode": "Plaintext"}}`), false, nil},
		{"yaml", "app:\n  startupProbe:\n    grpc:\n      port: 9090\n      mode: TLS\n", true, nil},
		{"null", annotationOf("app", "livenessProbe", `{"grpc": {"port": 9090, "mode": null}}`), false, nil},
		{"unsupported", annotationOf("app", "livenessProbe", `{"grpc": {"port": 9090, "mode": "Verify"}}`), false,
			[]string{`container "app" livenessProbe: grpc.mode: Unsupported value: "Verify": supported values: "Plaintext", "TLS"`}},
		{"case matters", annotationOf("app", "livenessProbe", `{"grpc": {"port": 9090, "mode": "tls"}}`), false,
			[]string{`container "app" livenessProbe: grpc.mode: Unsupported value: "tls": supported values: "Plaintext", "TLS"`}},
		{"not a string", annotationOf("app", "livenessProbe", `{"grpc": {"port": 9090, "mode": true}}`), false,
			[]string{`annotation "probed.io/probes": app.livenessProbe: cannot unmarshal bool into Go struct field GRPCAction.Probe.ProbeHandler.grpc.mode of type v1.GRPCProbeMode`}},
		{"not in httpGet", annotationOf("app", "livenessProbe", `{"httpGet": {"port": 80, "mode": "TLS"}}`), false,
			[]string{`annotation "probed.io/probes": app.livenessProbe: unknown field "httpGet.mode"`}},
		{"not beside grpc", annotationOf("app", "livenessProbe", `{"grpc": {"port": 9090}, "mode": "TLS"}`), false,
			[]string{`annotation "probed.io/probes": app.livenessProbe: unknown field "mode"`}},
		{"duplicate", annotationOf("app", "livenessProbe", `{"grpc": {"port": 9090, "mode": "TLS", "mode": "TLS"}}`), false,
			[]string{`annotation "probed.io/probes": app.livenessProbe: duplicate field "grpc.mode"`}},
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
			if m := probes[0].Probe.GRPC.Mode; (m != nil && *m == v1.GRPCProbeModeTLS) != tc.wantTLS {
				t.Errorf("grpc.mode = %v; want TLS: %v", m, tc.wantTLS)
			}
			if p := probes[0].Probe; p.GRPC == nil || p.GRPC.Port != 9090 || p.GRPC.Service == nil {
				t.Errorf("grpc = %+v; want port 9090 and a defaulted service", p.GRPC)
			}
		})
	}
	// Plaintext and no mode are the same probe: an edit between them keeps the worker.
	a, _ := DeclaredProbes(testPod(annotationOf("app", "livenessProbe", `{"grpc": {"port": 9090}}`)), ProbeSourceAnnotation)
	b, _ := DeclaredProbes(testPod(annotationOf("app", "livenessProbe", `{"grpc": {"port": 9090, "mode": "Plaintext"}}`)), ProbeSourceAnnotation)
	c, _ := DeclaredProbes(testPod(annotationOf("app", "livenessProbe", `{"grpc": {"port": 9090, "mode": "TLS"}}`)), ProbeSourceAnnotation)
	if !SameExtensions(a[0], b[0]) || !ProbeSpecEqual(a[0].Probe, b[0].Probe) {
		t.Error("no mode and Plaintext differ")
	}
	if ProbeSpecEqual(a[0].Probe, c[0].Probe) {
		t.Error("TLS is the same as no mode")
	}
}
