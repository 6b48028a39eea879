package probespec

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/probed-dev/probed/pkg/hostpolicy"
)

// Each rule of adoptrules.go on its own: the probe stays in the spec,
// untouched, Left names it with the rule's reason, and the other probes of
// the pod still move.
func TestAdoptLeavesWhatProbedWouldNotRunAsTheKubelet(t *testing.T) {
	always, onFailure := v1.ContainerRestartPolicyAlways, v1.ContainerRestartPolicyOnFailure
	tcp := func(host string, port int) *v1.Probe {
		return &v1.Probe{ProbeHandler: v1.ProbeHandler{TCPSocket: &v1.TCPSocketAction{Host: host, Port: intstr.FromInt32(int32(port))}}}
	}
	httpHost := func(host string) *v1.Probe {
		p := httpProbe("/healthz", 8080)
		p.HTTPGet.Host = host
		return p
	}
	for _, tc := range []struct {
		name   string
		mutate func(*v1.PodSpec)
		opts   AdoptOptions
		left   string // "<container>/<field>"
		reason string // a part of the reason
	}{
		{
			name: "liveness under restartPolicy OnFailure",
			mutate: func(s *v1.PodSpec) {
				s.RestartPolicy = v1.RestartPolicyOnFailure
				s.Containers[0].StartupProbe = nil
			},
			left: "app/livenessProbe", reason: "restartPolicy OnFailure",
		},
		{
			name: "startup under restartPolicy OnFailure",
			mutate: func(s *v1.PodSpec) {
				s.RestartPolicy = v1.RestartPolicyOnFailure
				s.Containers[0].LivenessProbe = nil
			},
			left: "app/startupProbe", reason: "only if it exits non-zero",
		},
		{
			name:   "liveness of a container whose own restartPolicy is OnFailure",
			mutate: func(s *v1.PodSpec) { s.Containers[0].RestartPolicy = &onFailure; s.Containers[0].StartupProbe = nil },
			left:   "app/livenessProbe", reason: "OnFailure (the container's)",
		},
		{
			name: "a sidecar's startup probe",
			mutate: func(s *v1.PodSpec) {
				s.InitContainers[1].StartupProbe = tcp("", 15000)
			},
			left: "proxy/startupProbe", reason: "sidecar's startup probe",
		},
		{
			name:   "a host the default policy refuses everywhere",
			mutate: func(s *v1.PodSpec) { s.HostNetwork = true; s.Containers[0].LivenessProbe = httpHost("127.0.0.2") },
			left:   "app/livenessProbe", reason: `httpGet.host "127.0.0.2": 127.0.0.2 is loopback, refused by --probe-host-policy=deny-node-local`,
		},
		{
			name:   "localhost is loopback",
			mutate: func(s *v1.PodSpec) { s.Containers[0].ReadinessProbe = tcp("localhost", 8080) },
			left:   "app/readinessProbe", reason: `tcpSocket.host "localhost": 127.0.0.1 is loopback`,
		},
		{
			name:   "metadata address",
			mutate: func(s *v1.PodSpec) { s.Containers[0].ReadinessProbe = httpHost("169.254.169.254") },
			left:   "app/readinessProbe", reason: "link-local/metadata",
		},
		{
			name:   "any host under pod-ips",
			mutate: func(s *v1.PodSpec) { s.Containers[0].ReadinessProbe = httpHost("db.example") },
			opts:   AdoptOptions{HostPolicy: hostpolicy.PodIPs},
			left:   "app/readinessProbe", reason: "only the pod's own IPs",
		},
		{
			name: "a named port that resolves to nothing",
			mutate: func(s *v1.PodSpec) {
				s.Containers[0].ReadinessProbe = &v1.Probe{ProbeHandler: v1.ProbeHandler{TCPSocket: &v1.TCPSocketAction{Port: intstr.FromString("metrics")}}}
			},
			left: "app/readinessProbe", reason: `probed would refuse it: container "app" readinessProbe: tcpSocket.port: Invalid value: "metrics": no container port named "metrics"`,
		},
		{
			name:   "the startup probe of a container whose liveness probe stays",
			mutate: func(s *v1.PodSpec) { s.HostNetwork = true; s.Containers[0].LivenessProbe = httpHost("127.0.0.2") },
			left:   "app/startupProbe", reason: "the container's livenessProbe stays with the kubelet, which runs it only once the startup probe has passed",
		},
		{
			name: "the startup probe of a container whose readiness probe stays",
			mutate: func(s *v1.PodSpec) {
				s.Containers[0].ReadinessProbe = &v1.Probe{ProbeHandler: v1.ProbeHandler{TCPSocket: &v1.TCPSocketAction{Port: intstr.FromString("metrics")}}}
			},
			left: "app/startupProbe", reason: "readinessProbe stays with the kubelet",
		},
		{
			name: "an exec command over probed's bounds",
			mutate: func(s *v1.PodSpec) {
				s.Containers[0].LivenessProbe = execProbe(strings.Split(strings.Repeat("a ", MaxExecArgs+1), " ")[:MaxExecArgs+1]...)
				s.Containers[0].StartupProbe = nil
			},
			left: "app/livenessProbe", reason: "probed would refuse it: livenessProbe.exec.command: Too many: 257: must have at most 256 arguments",
		},
		{
			name:   "a routable host: Pod Security decides",
			mutate: func(s *v1.PodSpec) { s.Containers[0].ReadinessProbe = httpHost("10.1.2.3") },
			left:   "app/readinessProbe", reason: "it sets httpGet.host: Pod Security (baseline, 1.34+) forbids host in probes",
		},
		{
			name:   "a host name: Pod Security decides",
			mutate: func(s *v1.PodSpec) { s.Containers[0].ReadinessProbe = tcp("db.example", 5432) },
			left:   "app/readinessProbe", reason: "it sets tcpSocket.host: Pod Security",
		},
		{
			name:   "loopback under the kubelet policy: Pod Security decides",
			mutate: func(s *v1.PodSpec) { s.Containers[0].LivenessProbe = httpHost("127.0.0.1") },
			opts:   AdoptOptions{HostPolicy: hostpolicy.Kubelet},
			left:   "app/livenessProbe", reason: "Pod Security",
		},
		{
			name: "HTTP2 (h2c) with the API server's gate off",
			mutate: func(s *v1.PodSpec) {
				p := v1.HTTPProtocolHTTP2
				s.Containers[0].ReadinessProbe.HTTPGet.Protocol = &p
			},
			left: "app/readinessProbe", reason: "httpGet.protocol HTTP2 is alpha: the API server drops it after admission unless its H2CContainerProbe gate is on (--api-server-feature-gates), and the kubelet then probes over HTTP/1.1",
		},
		{
			name: "gRPC over TLS with the API server's gate off",
			mutate: func(s *v1.PodSpec) {
				m := v1.GRPCProbeModeTLS
				s.Containers[0].LivenessProbe = &v1.Probe{ProbeHandler: v1.ProbeHandler{GRPC: &v1.GRPCAction{Port: 9090, Mode: &m}}}
			},
			opts: AdoptOptions{APIServerGates: APIServerGates{H2CContainerProbe: true}},
			left: "app/livenessProbe", reason: "grpc.mode TLS is alpha: the API server drops it after admission unless its GRPCContainerProbeTLS gate is on (--api-server-feature-gates), and the kubelet then probes in plaintext",
		},
		{
			name:   "a pod for Windows nodes",
			mutate: func(s *v1.PodSpec) { s.OS = &v1.PodOS{Name: v1.Windows} },
			left:   "app/livenessProbe", reason: "Windows",
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pod := adoptPod()
			pod.Spec.InitContainers[1].RestartPolicy = &always
			tc.mutate(&pod.Spec)
			orig := pod.DeepCopy()
			a, err := AdoptWith(&pod.ObjectMeta, &pod.Spec, tc.opts)
			if err != nil {
				t.Fatal(err)
			}
			var found *Left
			for i := range a.Left {
				if a.Left[i].Probe == tc.left {
					found = &a.Left[i]
				}
			}
			if found == nil {
				t.Fatalf("%s moved; Left = %v, Moved = %v", tc.left, a.Left, a.Moved)
			}
			if !strings.Contains(found.Reason, tc.reason) {
				t.Errorf("reason %q does not say %q", found.Reason, tc.reason)
			}
			container, field, _ := strings.Cut(tc.left, "/")
			if got, was := specProbe(&pod.Spec, container, field), specProbe(&orig.Spec, container, field); !equality.Semantic.DeepEqual(got, was) {
				t.Errorf("the left probe changed: %+v -> %+v", was, got)
			}
			if strings.Contains(pod.Annotations[ProbesAnnotation], `"`+field+`"`) && strings.Contains(pod.Annotations[ProbesAnnotation], `"`+container+`":{"`+field) {
				t.Errorf("the annotation declares the left probe too: %s", pod.Annotations[ProbesAnnotation])
			}
			if strings.Contains(pod.Annotations[AdoptedAnnotation], tc.left) {
				t.Errorf("%s = %q lists the left probe", AdoptedAnnotation, pod.Annotations[AdoptedAnnotation])
			}
			if tc.reason != "Windows" && len(a.Moved) == 0 {
				t.Errorf("nothing else moved: %+v", a)
			}
			// Adopting again changes nothing and leaves the same.
			again := pod.DeepCopy()
			a2, err := AdoptWith(&again.ObjectMeta, &again.Spec, tc.opts)
			if err != nil || a2.Changed() || !equality.Semantic.DeepEqual(again, pod) || !reflect.DeepEqual(a2.Left, a.Left) {
				t.Errorf("a second adoption: %+v %v", a2, err)
			}
		})
	}
}

func specProbe(s *v1.PodSpec, container, field string) *v1.Probe {
	c := restartpolicyContainer(s, container)
	switch field {
	case "livenessProbe":
		return c.LivenessProbe
	case "readinessProbe":
		return c.ReadinessProbe
	}
	return c.StartupProbe
}

func restartpolicyContainer(s *v1.PodSpec, name string) *v1.Container {
	for _, list := range [][]v1.Container{s.InitContainers, s.Containers} {
		for i := range list {
			if list[i].Name == name {
				return &list[i]
			}
		}
	}
	return &v1.Container{}
}

// Without a rule against them, probes move as before: Always and Never
// pods, a sidecar's liveness and readiness, and the alpha fields the API
// server keeps (its gate is on) or whose value changes nothing.
func TestAdoptMovesWhatProbedRunsAsTheKubelet(t *testing.T) {
	for _, tc := range []struct {
		name   string
		mutate func(*v1.PodSpec)
		opts   AdoptOptions
	}{
		{"restartPolicy Never", func(s *v1.PodSpec) { s.RestartPolicy = v1.RestartPolicyNever }, AdoptOptions{}},
		{"a sidecar's liveness", func(s *v1.PodSpec) { s.InitContainers[1].LivenessProbe = execProbe("true") }, AdoptOptions{}},
		// Invalid for the API server too: it moves, and is refused with the
		// daemon's words where the annotation is validated.
		{"a probe without a handler", func(s *v1.PodSpec) { s.Containers[0].ReadinessProbe = &v1.Probe{PeriodSeconds: 5} }, AdoptOptions{}},
		{"HTTP2 (h2c), the API server's gate on", func(s *v1.PodSpec) {
			p := v1.HTTPProtocolHTTP2
			s.Containers[0].ReadinessProbe.HTTPGet.Protocol = &p
		}, AdoptOptions{APIServerGates: APIServerGates{H2CContainerProbe: true}}},
		{"gRPC over TLS, the API server's gate on", func(s *v1.PodSpec) {
			m := v1.GRPCProbeModeTLS
			s.Containers[0].LivenessProbe = &v1.Probe{ProbeHandler: v1.ProbeHandler{GRPC: &v1.GRPCAction{Port: 9090, Mode: &m}}}
		}, AdoptOptions{APIServerGates: APIServerGates{GRPCContainerProbeTLS: true}}},
		{"gRPC in plaintext, said", func(s *v1.PodSpec) {
			m := v1.GRPCProbeModePlaintext
			s.Containers[0].LivenessProbe = &v1.Probe{ProbeHandler: v1.ProbeHandler{GRPC: &v1.GRPCAction{Port: 9090, Mode: &m}}}
		}, AdoptOptions{}},
		{"HTTP1, the default protocol, said", func(s *v1.PodSpec) {
			p := v1.HTTPProtocolHTTP1
			s.Containers[0].ReadinessProbe.HTTPGet.Protocol = &p
		}, AdoptOptions{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pod := adoptPod()
			tc.mutate(&pod.Spec)
			a, err := AdoptWith(&pod.ObjectMeta, &pod.Spec, tc.opts)
			if err != nil {
				t.Fatal(err)
			}
			if len(a.Left) != 0 {
				t.Errorf("left %v", a.Left)
			}
		})
	}
}

// A probe carrying a field this build does not know stays in the spec as
// written: the raw JSON is compared with what the typed decode keeps, the
// typed decode alone cannot tell. The field here is invented for the test.
func TestAdoptLeavesProbesWithFieldsItDoesNotKnow(t *testing.T) {
	raw := []byte(`{
	  "containers": [{
	    "name": "app", "image": "img",
	    "ports": [{"name": "http", "containerPort": 8080}],
	    "livenessProbe": {"httpGet": {"port": 8080, "path": "/", "probedTestOnlyFlavour": "spicy"}, "periodSeconds": 5},
	    "readinessProbe": {"httpGet": {"port": "http", "path": "/ready", "httpHeaders": [], "host": ""}, "exec": null},
	    "startupProbe": {"tcpSocket": {"port": 8080}, "FailureThreshold": 30, "probedTestOnlyEmpty": {}}
	  }]
	}`)
	var spec v1.PodSpec
	if err := json.Unmarshal(raw, &spec); err != nil {
		t.Fatal(err)
	}
	if spec.Containers[0].StartupProbe.FailureThreshold != 30 {
		t.Fatal("encoding/json no longer decodes case-insensitively; the test's premise is gone")
	}
	meta := metav1.ObjectMeta{}
	orig := spec.DeepCopy()
	a, err := AdoptWith(&meta, &spec, AdoptOptions{RawSpec: raw})
	if err != nil {
		t.Fatal(err)
	}
	want := []Left{
		{"app/livenessProbe", `it sets "httpGet.probedTestOnlyFlavour", which this build of probed does not know`},
		{"app/startupProbe", `it sets "FailureThreshold", "probedTestOnlyEmpty", which this build of probed does not know`},
	}
	if !reflect.DeepEqual(a.Left, want) {
		t.Errorf("Left = %q\nwant   %q", a.Left, want)
	}
	if !reflect.DeepEqual(a.Moved, []string{"app/readinessProbe"}) {
		t.Errorf("Moved = %v: empty values of known fields are no reason to leave a probe", a.Moved)
	}
	if !equality.Semantic.DeepEqual(spec.Containers[0].LivenessProbe, orig.Containers[0].LivenessProbe) ||
		!equality.Semantic.DeepEqual(spec.Containers[0].StartupProbe, orig.Containers[0].StartupProbe) {
		t.Error("a left probe changed")
	}
}

func TestProbeFieldsNotKept(t *testing.T) {
	got := ProbeFieldsNotKept([]byte(`{"initContainers":[{"name":"s","restartPolicy":"Always",
		"readinessProbe":{"grpc":{"port":1,"mode":"TLS","tlsServerName":"x"},"httpHeaders":null}}],
		"containers":[{"name":"a","startupProbe":{"httpGet":{"port":1,"httpHeaders":[{"name":"A","value":"b","vaule":"c"}]},"periodSeconds":10}}]}`))
	want := map[string][]string{
		"s/readinessProbe": {"grpc.tlsServerName"}, // null is absent, known or not
		"a/startupProbe":   {"httpGet.httpHeaders[0].vaule"},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("ProbeFieldsNotKept = %v, want %v", got, want)
	}
	if got := ProbeFieldsNotKept([]byte(`not json`)); got != nil {
		t.Errorf("not JSON: %v", got)
	}
}

// A container's probes that would make the annotation longer than
// MaxAnnotationBytes (which probed would refuse whole) stay with the
// kubelet, all of them; another container's that fit move.
func TestAdoptLeavesWhatWouldOutgrowTheAnnotation(t *testing.T) {
	entry := func(n int) string {
		return `{"proxy":{"livenessProbe":{"httpGet":{"port":1,"path":"/","httpHeaders":[{"name":"X","value":"` + strings.Repeat("x", n) + `"}]}}}}`
	}
	const room = 300 // for the proxy's readiness probe, not for app's three
	pod := adoptPod()
	pod.Annotations = map[string]string{ProbesAnnotation: entry(MaxAnnotationBytes - room - len(entry(0)))}
	orig := pod.DeepCopy()
	a, err := Adopt(&pod.ObjectMeta, &pod.Spec)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(a.Moved, []string{"proxy/readinessProbe"}) || len(a.Left) != 3 {
		t.Fatalf("moved %v, left %v; want the proxy's readiness probe moved and app's three left", a.Moved, a.Left)
	}
	for _, l := range a.Left {
		if !strings.HasPrefix(l.Probe, "app/") || l.Probe != "app/startupProbe" && !strings.Contains(l.Reason, "longer than its limit of 32768 bytes") {
			t.Errorf("left %s: %q", l.Probe, l.Reason)
		}
	}
	if !equality.Semantic.DeepEqual(pod.Spec.Containers, orig.Spec.Containers) {
		t.Error("app's spec probes changed")
	}
	if got := len(pod.Annotations[ProbesAnnotation]); got > MaxAnnotationBytes || got < MaxAnnotationBytes-room {
		t.Errorf("the annotation has %d bytes", got)
	}
	if _, problems := DeclaredProbes(pod, ProbeSourceAnnotation); len(problems) != 0 {
		t.Errorf("the adopted annotation: %q", problemStrings(problems))
	}
}
