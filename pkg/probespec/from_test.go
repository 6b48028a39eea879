package probespec

import (
	"reflect"
	"strings"
	"testing"
)

func TestDeclaredProbesFrom(t *testing.T) {
	probe := func(handler, from string) string {
		return annotationOf("app", "readinessProbe", `{`+handler+`, "probed.io/from": `+from+`}`)
	}
	const prefix = `container "app" readinessProbe: `
	for _, tc := range []struct {
		name        string
		ann         string
		hostNetwork bool
		wantPod     bool
		wantProbs   []string
	}{
		{"httpGet", probe(`"httpGet": {"port": 8080, "path": "/healthz"}`, `"Pod"`), false, true, nil},
		{"httpGet to 127.0.0.1", probe(`"httpGet": {"port": 8080, "host": "127.0.0.1"}`, `"Pod"`), false, true, nil},
		{"h2c", probe(`"httpGet": {"port": 8080, "protocol": "HTTP2"}`, `"Pod"`), false, true, nil},
		{"https", probe(`"httpGet": {"port": 8443, "scheme": "HTTPS", "host": "localhost"}`, `"Pod"`), false, true, nil},
		{"tcpSocket to ::1", probe(`"tcpSocket": {"port": 5432, "host": "::1"}`, `"Pod"`), false, true, nil},
		{"grpc TLS", probe(`"grpc": {"port": 9090, "mode": "TLS"}`, `"Pod"`), false, true, nil},
		{"Node is the default", probe(`"exec": {"command": ["true"]}`, `"Node"`), false, false, nil},
		{"exec", probe(`"exec": {"command": ["true"]}`, `"Pod"`), false, false, []string{
			prefix + `probed.io/from: Invalid value: "Pod": only httpGet, tcpSocket and grpc probes can be sent from inside the pod (an exec probe runs there already)`,
		}},
		{"hostNetwork", probe(`"tcpSocket": {"port": 5432}`, `"Pod"`), true, false, []string{
			prefix + `probed.io/from: Invalid value: "Pod": a pod on the node's network (hostNetwork) has no network namespace of its own`,
		}},
		{"another host", probe(`"httpGet": {"port": 8080, "host": "10.0.0.7"}`, `"Pod"`), false, false, []string{
			prefix + `httpGet.host: Invalid value: "10.0.0.7": with probed.io/from Pod, must be empty (the pod's loopback), localhost or a loopback address`,
		}},
		{"a name", probe(`"tcpSocket": {"port": 80, "host": "db.shop.svc"}`, `"Pod"`), false, false, []string{
			prefix + `tcpSocket.host: Invalid value: "db.shop.svc": with probed.io/from Pod, must be empty (the pod's loopback), localhost or a loopback address`,
		}},
		{"a zoned loopback", probe(`"tcpSocket": {"port": 80, "host": "::1%eth0"}`, `"Pod"`), false, false, []string{
			prefix + `tcpSocket.host: Invalid value: "::1%eth0": with probed.io/from Pod, must be empty (the pod's loopback), localhost or a loopback address`,
		}},
		{"case matters", probe(`"tcpSocket": {"port": 80}`, `"pod"`), false, false, []string{
			prefix + `probed.io/from: Unsupported value: "pod": supported values: "Node", "Pod"`,
		}},
		{"not a string", probe(`"tcpSocket": {"port": 80}`, `true`), false, false, []string{
			`annotation "probed.io/probes": app.readinessProbe: cannot unmarshal bool into Go struct field Probe.probed.io/from of type string`,
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pod := testPod(tc.ann)
			pod.Spec.HostNetwork = tc.hostNetwork
			probes, problems := DeclaredProbes(pod, ProbeSourceAnnotation)
			if got := problemStrings(problems); !reflect.DeepEqual(got, tc.wantProbs) {
				t.Fatalf("problems:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(tc.wantProbs, "\n"))
			}
			if tc.wantProbs != nil {
				if len(probes) != 0 {
					t.Fatalf("declared %v; want nothing", probeKeysOf(probes))
				}
				return
			}
			if len(probes) != 1 || probes[0].FromPod != tc.wantPod {
				t.Fatalf("declared %+v; want one with FromPod %v", probes, tc.wantPod)
			}
		})
	}
}

// Moving a probe into the pod restarts its worker.
func TestSameExtensionsFrom(t *testing.T) {
	if SameExtensions(DeclaredProbe{FromPod: true}, DeclaredProbe{}) {
		t.Error("from the pod and from the node are the same")
	}
}

// Sending a probe from inside the pod is reach: it acts as the pod, and
// reaches what listens only on the pod's loopback. Saying "Node" out loud
// is not.
func TestFromReach(t *testing.T) {
	const tcp = `"tcpSocket": {"port": 8080}`
	created := annotationOf("app", "readinessProbe", `{`+tcp+`}`)
	old := testPod(created)
	old.Annotations[ApprovedReachAnnotation] = approve(t, created)
	for _, tc := range []struct {
		name, ext string
		want      []string
	}{
		{"Node spelt out", `, "probed.io/from": "Node"`, nil},
		{"moved into the pod", `, "probed.io/from": "Pod"`, []string{
			`container "app" readinessProbe: probed.io/from: Forbidden: changing what a probe runs or where it connects needs create on pods/exec for this pod, as kubectl exec does`,
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ann := annotationOf("app", "readinessProbe", `{`+tcp+tc.ext+`}`)
			nw := testPod(ann)
			nw.Annotations[ApprovedReachAnnotation] = old.Annotations[ApprovedReachAnnotation]
			got, err := UnapprovedReachEdits(old, nw)
			if err != nil {
				t.Fatal(err)
			}
			if s := problemStrings(got); !reflect.DeepEqual(s, tc.want) {
				t.Errorf("edits:\n%s\nwant:\n%s", strings.Join(s, "\n"), strings.Join(tc.want, "\n"))
			}
		})
	}
}
