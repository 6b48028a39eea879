package probespec

import (
	"reflect"
	"testing"
	"time"
)

func TestDeclaredProbesSubSecond(t *testing.T) {
	for _, tc := range []struct {
		name                string
		ann                 string
		wantPeriod, wantTmo time.Duration
		wantProbs           []string
	}{
		{"absent", annotationOf("app", "readinessProbe", `{"tcpSocket": {"port": 80}}`), 0, 0, nil},
		{"both", annotationOf("app", "readinessProbe", `{"tcpSocket": {"port": 80}, "probed.io/periodMilliseconds": 100, "probed.io/timeoutMilliseconds": 50}`),
			100 * time.Millisecond, 50 * time.Millisecond, nil},
		{"exec and liveness too", annotationOf("app", "livenessProbe", `{"exec": {"command": ["true"]}, "probed.io/periodMilliseconds": 250}`), 250 * time.Millisecond, 0, nil},
		{"yaml", "app:\n  startupProbe:\n    grpc: {port: 9090}\n    probed.io/timeoutMilliseconds: 300\n", 0, 300 * time.Millisecond, nil},
		{"period below the minimum", annotationOf("app", "readinessProbe", `{"tcpSocket": {"port": 80}, "probed.io/periodMilliseconds": 99}`), 0, 0,
			[]string{`container "app" readinessProbe: probed.io/periodMilliseconds: Invalid value: 99: must be at least 100`}},
		{"timeout zero", annotationOf("app", "readinessProbe", `{"tcpSocket": {"port": 80}, "probed.io/timeoutMilliseconds": 0}`), 0, 0,
			[]string{`container "app" readinessProbe: probed.io/timeoutMilliseconds: Invalid value: 0: must be at least 1`}},
		{"negative", annotationOf("app", "readinessProbe", `{"tcpSocket": {"port": 80}, "probed.io/periodMilliseconds": -5}`), 0, 0,
			[]string{`container "app" readinessProbe: probed.io/periodMilliseconds: Invalid value: -5: must be at least 100`}},
		{"not a number", annotationOf("app", "readinessProbe", `{"tcpSocket": {"port": 80}, "probed.io/periodMilliseconds": "100ms"}`), 0, 0,
			[]string{`annotation "probed.io/probes": app.readinessProbe: cannot unmarshal string into Go struct field Probe.probed.io/periodMilliseconds of type int32`}},
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
			d := probes[0]
			if d.Period != tc.wantPeriod || d.Timeout != tc.wantTmo {
				t.Errorf("Period, Timeout = %v, %v; want %v, %v", d.Period, d.Timeout, tc.wantPeriod, tc.wantTmo)
			}
			wantEvery := tc.wantPeriod
			if wantEvery == 0 {
				wantEvery = 10 * time.Second
			}
			if d.PeriodDuration() != wantEvery {
				t.Errorf("PeriodDuration = %v; want %v", d.PeriodDuration(), wantEvery)
			}
		})
	}
	a, _ := DeclaredProbes(testPod(annotationOf("app", "readinessProbe", `{"tcpSocket": {"port": 80}, "probed.io/periodMilliseconds": 100}`)), ProbeSourceAnnotation)
	b, _ := DeclaredProbes(testPod(annotationOf("app", "readinessProbe", `{"tcpSocket": {"port": 80}, "probed.io/periodMilliseconds": 200}`)), ProbeSourceAnnotation)
	if SameExtensions(a[0], b[0]) {
		t.Error("an edit of probed.io/periodMilliseconds keeps the worker")
	}
}
