// This file has no build tag: it checks examples/demo offline, in the unit
// tier. The e2e tier (build tag e2e) also applies the demo to a real node.

package e2e

import (
	"os"
	"path/filepath"
	"sort"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	"github.com/probed-dev/probed/pkg/probespec"
	"github.com/probed-dev/probed/test/harness/manifest"
)

const (
	demoDir = "../../examples/demo"
	demoNS  = "probed-demo"
)

// demoObjects decodes every object of examples/demo/*.yaml, strictly (an
// unknown field is an error), in the order kubectl apply -f takes them.
func demoObjects(t *testing.T) (namespaces []v1.Namespace, deployments []appsv1.Deployment, services []v1.Service) {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(demoDir, "*.yaml"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no manifests in %s: %v", demoDir, err)
	}
	sort.Strings(files)
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		docs, err := manifest.Documents(b)
		if err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		for _, doc := range docs {
			var tm metav1.TypeMeta
			if err := yaml.Unmarshal(doc, &tm); err != nil {
				t.Fatalf("%s: %v", f, err)
			}
			if tm.Kind == "" {
				continue
			}
			var obj any
			switch tm.Kind {
			case "Namespace":
				namespaces = append(namespaces, v1.Namespace{})
				obj = &namespaces[len(namespaces)-1]
			case "Deployment":
				deployments = append(deployments, appsv1.Deployment{})
				obj = &deployments[len(deployments)-1]
			case "Service":
				services = append(services, v1.Service{})
				obj = &services[len(services)-1]
			default:
				t.Fatalf("%s: unexpected kind %s", f, tm.Kind)
			}
			if err := yaml.UnmarshalStrict(doc, obj); err != nil {
				t.Fatalf("%s: %s: %v", f, tm.Kind, err)
			}
		}
	}
	return namespaces, deployments, services
}

// The demo's pods declare only valid probes, gate readiness on probed.io/ready,
// and run the locally built images without pulling.
func TestDemoManifestsOffline(t *testing.T) {
	namespaces, deployments, services := demoObjects(t)
	if len(namespaces) != 1 || namespaces[0].Name != demoNS {
		t.Fatalf("want exactly the namespace %s, got %v", demoNS, namespaces)
	}
	if len(deployments) < 4 {
		t.Errorf("%d deployments, want at least 4 (readiness flip, liveness restarts, slow start, gRPC)", len(deployments))
	}
	local := map[string]bool{imgBusyboxName: true, imgTargetName: true}
	types := map[string]bool{}
	for _, d := range deployments {
		if d.Namespace != demoNS {
			t.Errorf("deployment %s in namespace %q", d.Name, d.Namespace)
		}
		pod := &v1.Pod{ObjectMeta: d.Spec.Template.ObjectMeta, Spec: d.Spec.Template.Spec}
		gated := false
		for _, g := range pod.Spec.ReadinessGates {
			gated = gated || g.ConditionType == "probed.io/ready"
		}
		if !gated {
			t.Errorf("deployment %s: no probed.io/ready readiness gate", d.Name)
		}
		probes, problems := probespec.DeclaredProbes(pod, probespec.ProbeSourceAnnotation)
		for _, p := range problems {
			t.Errorf("deployment %s: %s", d.Name, p)
		}
		if len(probes) == 0 {
			t.Errorf("deployment %s declares no probes", d.Name)
		}
		for _, p := range probes {
			types[p.Type.String()] = true
			switch {
			case p.Probe.Exec != nil:
				types["exec"] = true
			case p.Probe.HTTPGet != nil:
				types["httpGet"] = true
			case p.Probe.GRPC != nil:
				types["grpc"] = true
			case p.Probe.TCPSocket != nil:
				types["tcpSocket"] = true
			}
			if p.InitContainer {
				types["sidecar"] = true
			}
		}
		for _, c := range append(append([]v1.Container{}, pod.Spec.InitContainers...), pod.Spec.Containers...) {
			if !local[c.Image] {
				t.Errorf("deployment %s container %s: image %q is not built locally (%v)", d.Name, c.Name, c.Image, local)
			}
			if c.ImagePullPolicy == v1.PullAlways || c.ImagePullPolicy == "" {
				t.Errorf("deployment %s container %s: imagePullPolicy %q would pull a :latest image from a registry", d.Name, c.Name, c.ImagePullPolicy)
			}
		}
	}
	for _, want := range []string{"Liveness", "Readiness", "Startup", "httpGet", "grpc", "exec", "sidecar"} {
		if !types[want] {
			t.Errorf("no demo workload uses %s", want)
		}
	}
	for _, s := range services {
		matched := false
		for _, d := range deployments {
			ok := len(s.Spec.Selector) > 0
			for k, v := range s.Spec.Selector {
				ok = ok && d.Spec.Template.Labels[k] == v
			}
			matched = matched || ok
		}
		if !matched {
			t.Errorf("service %s selects no demo pods", s.Name)
		}
	}
}

const (
	imgBusyboxName = "probed.local/busybox:latest"
	imgTargetName  = "probed.local/probe-target:latest"
)
