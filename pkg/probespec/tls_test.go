package probespec

import (
	"reflect"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
)

// tlsPod is testPod with the volumes probed.io/tls may name, and one it may not.
func tlsPod(ann string) *v1.Pod {
	p := testPod(ann)
	p.Spec.Volumes = []v1.Volume{
		{Name: "certs", VolumeSource: v1.VolumeSource{Secret: &v1.SecretVolumeSource{SecretName: "app-tls"}}},
		{Name: "bundle", VolumeSource: v1.VolumeSource{ConfigMap: &v1.ConfigMapVolumeSource{LocalObjectReference: v1.LocalObjectReference{Name: "trust"}}}},
		{Name: "proj", VolumeSource: v1.VolumeSource{Projected: &v1.ProjectedVolumeSource{}}},
		{Name: "scratch", VolumeSource: v1.VolumeSource{EmptyDir: &v1.EmptyDirVolumeSource{}}},
	}
	return p
}

func TestDeclaredProbesTLS(t *testing.T) {
	const https = `"httpGet": {"port": 8443, "scheme": "HTTPS"}`
	probe := func(handler, tls string) string {
		return annotationOf("app", "readinessProbe", `{`+handler+`, "probed.io/tls": `+tls+`}`)
	}
	const prefix = `container "app" readinessProbe: probed.io/tls`
	for _, tc := range []struct {
		name      string
		ann       string
		want      *TLS
		wantProbs []string
	}{
		{"defaults: system roots", probe(https, `{}`), &TLS{Roots: RootsSystem}, nil},
		{"ca from a secret, client certificate", probe(https, `{"serverName": "web.shop.svc", "ca": {"volume": "certs"}, "clientCertificate": {"volume": "certs"}}`), &TLS{
			ServerName: "web.shop.svc",
			CA:         &VolumeFile{Volume: "certs", Kind: VolumeSecret, Path: "ca.crt"},
			ClientCert: &VolumeFile{Volume: "certs", Kind: VolumeSecret, Path: "tls.crt"},
			ClientKey:  &VolumeFile{Volume: "certs", Kind: VolumeSecret, Path: "tls.key"},
		}, nil},
		{"trust-manager bundle, yaml", "app:\n  livenessProbe:\n    grpc: {port: 9090}\n    probed.io/tls:\n      ca: {volume: bundle, path: trust-bundle.pem}\n", &TLS{
			CA: &VolumeFile{Volume: "bundle", Kind: VolumeConfigMap, Path: "trust-bundle.pem"},
		}, nil},
		{"grpc mode TLS, projected, cluster roots", probe(`"grpc": {"port": 9090, "mode": "TLS"}`, `{"roots": "Cluster", "clientCertificate": {"volume": "proj", "certPath": "c/cert.pem", "keyPath": "c/key.pem"}}`), &TLS{
			Roots:      RootsCluster,
			ClientCert: &VolumeFile{Volume: "proj", Kind: VolumeProjected, Path: "c/cert.pem"},
			ClientKey:  &VolumeFile{Volume: "proj", Kind: VolumeProjected, Path: "c/key.pem"},
		}, nil},
		{"insecureSkipVerify with a client certificate", probe(https, `{"insecureSkipVerify": true, "serverName": "10.0.0.1", "clientCertificate": {"volume": "certs"}}`), &TLS{
			ServerName: "10.0.0.1", InsecureSkipVerify: true,
			ClientCert: &VolumeFile{Volume: "certs", Kind: VolumeSecret, Path: "tls.crt"},
			ClientKey:  &VolumeFile{Volume: "certs", Kind: VolumeSecret, Path: "tls.key"},
		}, nil},
		{"plain http", probe(`"httpGet": {"port": 80}`, `{}`), nil, []string{prefix + `: Invalid value: "": needs httpGet.scheme HTTPS`}},
		{"grpc plaintext", probe(`"grpc": {"port": 9090, "mode": "Plaintext"}`, `{}`), nil, []string{prefix + `: Invalid value: "": needs grpc.mode TLS or no grpc.mode, not Plaintext`}},
		{"tcpSocket", probe(`"tcpSocket": {"port": 80}`, `{}`), nil, []string{prefix + `: Invalid value: "": only httpGet probes with scheme HTTPS and grpc probes use TLS`}},
		{"unknown volume", probe(https, `{"ca": {"volume": "nope"}}`), nil, []string{prefix + `.ca.volume: Not found: "nope"`}},
		{"emptyDir", probe(https, `{"ca": {"volume": "scratch"}}`), nil, []string{prefix + `.ca.volume: Invalid value: "scratch": must be a secret, configMap or projected volume`}},
		{"no volume", probe(https, `{"clientCertificate": {}}`), nil, []string{
			prefix + `.clientCertificate.volume: Required value: names one of the pod's secret, configMap or projected volumes`,
			prefix + `.clientCertificate.volume: Required value: names one of the pod's secret, configMap or projected volumes`,
		}},
		{"climbing out", probe(https, `{"ca": {"volume": "certs", "path": "../../etc/shadow"}}`), nil, []string{prefix + `.ca.path: Invalid value: "../../etc/shadow": may not have an element starting with '..'`}},
		{"a dot element", probe(https, `{"ca": {"volume": "certs", "path": "./ca.crt"}}`), nil, []string{prefix + `.ca.path: Invalid value: "./ca.crt": must be a clean path (no empty, . or trailing elements)`}},
		{"the kubelet's own", probe(https, `{"ca": {"volume": "certs", "path": "..data/ca.crt"}}`), nil, []string{prefix + `.ca.path: Invalid value: "..data/ca.crt": may not have an element starting with '..'`}},
		{"absolute", probe(https, `{"clientCertificate": {"volume": "certs", "keyPath": "/etc/ssl/key"}}`), nil, []string{prefix + `.clientCertificate.keyPath: Invalid value: "/etc/ssl/key": must be relative to the volume`}},
		{"bad roots", probe(https, `{"roots": "Mozilla"}`), nil, []string{prefix + `.roots: Unsupported value: "Mozilla": supported values: "System", "Cluster"`}},
		{"roots with ca", probe(https, `{"roots": "System", "ca": {"volume": "certs"}}`), nil, []string{prefix + `.roots: Invalid value: "System": may not be set with ca`}},
		{"bad server name", probe(https, `{"serverName": "Web_Shop"}`), nil, []string{prefix + `.serverName: Invalid value: "Web_Shop": a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')`}},
		{"skip alone", probe(https, `{"insecureSkipVerify": true}`), nil, []string{prefix + `.insecureSkipVerify: Invalid value: true: without a clientCertificate it is the kubelet's TLS; leave probed.io/tls out`}},
		{"skip with ca", probe(https, `{"insecureSkipVerify": true, "ca": {"volume": "certs"}, "clientCertificate": {"volume": "certs"}}`), nil, []string{prefix + `.insecureSkipVerify: Invalid value: true: may not be set with ca or roots: it verifies nothing`}},
		{"unknown field", probe(https, `{"caFile": "/x"}`), nil, []string{`annotation "probed.io/probes": app.readinessProbe: unknown field "probed.io/tls.caFile"`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			probes, problems := DeclaredProbes(tlsPod(tc.ann), ProbeSourceAnnotation)
			if got := problemStrings(problems); !reflect.DeepEqual(got, tc.wantProbs) {
				t.Fatalf("problems:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(tc.wantProbs, "\n"))
			}
			if tc.want == nil {
				if len(probes) != 0 {
					t.Fatalf("declared %v; want nothing", probeKeysOf(probes))
				}
				return
			}
			if len(probes) != 1 || !reflect.DeepEqual(probes[0].TLS, tc.want) {
				t.Fatalf("declared %+v; want TLS %+v", probes, tc.want)
			}
		})
	}
}

// A spec probe with upstream's grpc.mode TLS keeps upstream's unverified
// TLS: only the annotation's probed.io/tls verifies.
func TestSpecTLSProbeStaysUnverified(t *testing.T) {
	pod := tlsPod("")
	tlsMode := v1.GRPCProbeModeTLS
	pod.Spec.Containers[0].LivenessProbe = &v1.Probe{ProbeHandler: v1.ProbeHandler{GRPC: &v1.GRPCAction{Port: 9090, Mode: &tlsMode}}}
	probes, problems := DeclaredProbes(pod, ProbeSourceSpec)
	if len(problems) != 0 || len(probes) != 1 || probes[0].TLS != nil {
		t.Fatalf("probes %+v, problems %v; want one unverified probe", probes, problemStrings(problems))
	}
}

// An edit of probed.io/tls keeps the worker only when nothing changed.
func TestSameExtensionsTLS(t *testing.T) {
	a := DeclaredProbe{TLS: &TLS{Roots: RootsSystem, CA: &VolumeFile{Volume: "v", Kind: VolumeSecret, Path: "ca.crt"}}}
	b := DeclaredProbe{TLS: &TLS{Roots: RootsSystem, CA: &VolumeFile{Volume: "v", Kind: VolumeSecret, Path: "ca.crt"}}}
	if !SameExtensions(a, b) {
		t.Error("equal TLS settings differ")
	}
	b.TLS.CA.Path = "other.crt"
	if SameExtensions(a, b) {
		t.Error("a changed CA path is the same")
	}
	if SameExtensions(a, DeclaredProbe{}) {
		t.Error("TLS and none are the same")
	}
}

// A client certificate is reach (the pod's credential on a request), the
// rest of probed.io/tls is free: it only narrows what passes.
func TestTLSReach(t *testing.T) {
	const https = `"httpGet": {"port": 8443, "scheme": "HTTPS"}`
	created := annotationOf("app", "readinessProbe", `{`+https+`, "probed.io/tls": {"ca": {"volume": "certs"}}}`)
	old := tlsPod(created)
	old.Annotations[ApprovedReachAnnotation] = approve(t, created)
	for _, tc := range []struct {
		name, tls string
		want      []string
	}{
		{"another CA and name", `{"serverName": "x.test", "ca": {"volume": "bundle"}}`, nil},
		{"client certificate added", `{"ca": {"volume": "certs"}, "clientCertificate": {"volume": "certs"}}`, []string{
			`container "app" readinessProbe: probed.io/tls.clientCertificate: Forbidden: changing what a probe runs or where it connects needs create on pods/exec for this pod, as kubectl exec does`,
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ann := annotationOf("app", "readinessProbe", `{`+https+`, "probed.io/tls": `+tc.tls+`}`)
			nw := tlsPod(ann)
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
