package manager

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
		{"absent", specAnn("app", "readinessProbe", `{"httpGet": {"port": 80, "path": "/"}}`), false, nil},
		{"httpGet true", specAnn("app", "readinessProbe", `{"httpGet": {"port": 80, "path": "/"}, "probed.io/keepAlive": true}`), true, nil},
		{"grpc true", specAnn("app", "livenessProbe", `{"grpc": {"port": 9090}, "probed.io/keepAlive": true}`), true, nil},
		{"httpGet false", specAnn("app", "readinessProbe", `{"httpGet": {"port": 80, "path": "/"}, "probed.io/keepAlive": false}`), false, nil},
		{"tcpSocket false", specAnn("app", "readinessProbe", `{"tcpSocket": {"port": 80}, "probed.io/keepAlive": false}`), false, nil},
		{"yaml", "app:\n  readinessProbe:\n    httpGet: {port: 80, path: /}\n    probed.io/keepAlive: true\n", true, nil},
		{"tcpSocket true", specAnn("app", "readinessProbe", `{"tcpSocket": {"port": 80}, "probed.io/keepAlive": true}`), false,
			[]string{`container "app" readinessProbe: probed.io/keepAlive: Invalid value: true: only httpGet and grpc probes can keep their connection alive`}},
		{"exec true", specAnn("app", "livenessProbe", `{"exec": {"command": ["true"]}, "probed.io/keepAlive": true}`), false,
			[]string{`container "app" livenessProbe: probed.io/keepAlive: Invalid value: true: only httpGet and grpc probes can keep their connection alive`}},
		{"not a boolean", specAnn("app", "readinessProbe", `{"httpGet": {"port": 80, "path": "/"}, "probed.io/keepAlive": "yes"}`), false,
			[]string{`annotation "probed.io/probes": app.readinessProbe: cannot unmarshal string into Go struct field Probe.probed.io/keepAlive of type bool`}},
		{"duplicate", `{"app": {"readinessProbe": {"httpGet": {"port": 80, "path": "/"}, "probed.io/keepAlive": true, "probed.io/keepAlive": false}}}`, false,
			[]string{`annotation "probed.io/probes": app.readinessProbe: duplicate field "probed.io/keepAlive"`}},
		{"case matters", specAnn("app", "readinessProbe", `{"httpGet": {"port": 80, "path": "/"}, "probed.io/keepalive": true}`), false,
			[]string{`annotation "probed.io/probes": app.readinessProbe: unknown field "probed.io/keepalive"`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			probes, problems := DeclaredProbes(specTestPod(tc.ann), ProbeSourceAnnotation)
			if got := specProblemStrings(problems); !reflect.DeepEqual(got, tc.wantProbs) {
				t.Fatalf("problems = %q; want %q", got, tc.wantProbs)
			}
			if tc.wantProbs != nil {
				if len(probes) != 0 {
					t.Fatalf("declared %v; want nothing", specKeys(probes))
				}
				return
			}
			if len(probes) != 1 {
				t.Fatalf("declared %v; want one probe", specKeys(probes))
			}
			if probes[0].KeepAlive != tc.wantKeep {
				t.Errorf("KeepAlive = %v; want %v", probes[0].KeepAlive, tc.wantKeep)
			}
		})
	}
}

// TestWorkersGetKeepAlive: "probed.io/keepAlive" reaches the prober's
// Target, with the worker's Session to keep the connection in.
func TestWorkersGetKeepAlive(t *testing.T) {
	tp := &targetProber{}
	e := newEnvWith(t, func(o *Options) { o.Prober = tp })
	kept := map[string]any{"httpGet": map[string]any{"port": 1, "path": "/"}, "periodSeconds": 1, KeepAliveField: true}
	plain := map[string]any{"httpGet": map[string]any{"port": 1, "path": "/"}, "periodSeconds": 1}
	pod := runningPod("p", "u1", annotate(map[string]map[string]any{"app": {"readinessProbe": kept, "livenessProbe": plain}}), "app")
	e.create(pod)
	e.eventually("both probes", func() bool {
		tp.mu.Lock()
		defer tp.mu.Unlock()
		return len(tp.targets) >= 2
	})
	tp.mu.Lock()
	defer tp.mu.Unlock()
	var on, off int
	for _, tg := range tp.targets {
		if tg.Session == nil {
			t.Errorf("httpGet target without a Session: %+v", tg)
		}
		if tg.KeepAlive {
			on++
		} else {
			off++
		}
	}
	if on == 0 || off == 0 {
		t.Errorf("KeepAlive on %d, off %d targets; want both", on, off)
	}
}
