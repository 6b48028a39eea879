//go:build integration

package integration

import (
	"context"
	"fmt"
	corev1 "k8s.io/api/core/v1"
	"os"
	"os/exec"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/yaml"
)

// helm lint passes, strict (warnings fail too), with the defaults and with
// every optional part on.
func TestChartLint(t *testing.T) {
	t.Parallel()
	helm := helmPath(t)
	for _, sets := range [][]string{
		nil,
		{"monitoring.enabled=true", "webhook.enabled=true", "namespace.create=true", "namespace.name=elsewhere", "probeTLS.podVolumes=true"},
		{"webhook.enabled=false", "flags.runtime-endpoint=unix:///var/run/crio/crio.sock", "flags.runtime-type=cri"},
	} {
		args := []string{"lint", "--strict", chartDir, "--set", "image.tag=dev"}
		for _, s := range sets {
			args = append(args, "--set", s)
		}
		if out, err := exec.Command(helm, args...).CombinedOutput(); err != nil {
			t.Errorf("helm %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
}

// The chart renders what deploy/ and deploy/monitoring render (kubectl
// kustomize), object for object and field for field, but for Helm's own
// labels: rendered with the Namespace and monitoring on, exactly the same
// set; with the defaults, deploy/ without its Namespace (Helm needs the
// release namespace to exist first, values.yaml says why) and without
// monitoring. The webhook's objects are compared when deploy/ includes the
// webhook; until it does, the chart's (labelled or named probed-webhook)
// are the only extra objects allowed.
func TestChartMatchesKustomize(t *testing.T) {
	t.Parallel()
	base := byKey(t, kustomize(t, "../../deploy"), "deploy/")
	mon := byKey(t, kustomize(t, "../../deploy/monitoring"), "deploy/monitoring")
	webhookInDeploy := base["Deployment/probed-system/probed-webhook"] != nil

	full := map[string]*unstructured.Unstructured{}
	for k, v := range base {
		full[k] = v
	}
	for k, v := range mon {
		full[k] = v
	}
	compareRender(t, "namespace.create and monitoring on",
		helmTemplate(t, "probed-system", "namespace.create=true", "monitoring.enabled=true"), full, webhookInDeploy)

	defaults := map[string]*unstructured.Unstructured{}
	for k, v := range base {
		if k != "Namespace//probed-system" {
			defaults[k] = v
		}
	}
	compareRender(t, "defaults", helmTemplate(t, "probed-system"), defaults, webhookInDeploy)
}

// compareRender checks that the chart's objects and want's are the same
// (but for Helm's labels and white space inside strings).
func compareRender(t *testing.T, what string, chart []*unstructured.Unstructured, want map[string]*unstructured.Unstructured, webhookInDeploy bool) {
	t.Helper()
	got := byKey(t, chart, "the chart")
	for _, k := range sortedKeys(got) {
		g := withoutHelmLabels(got[k])
		w, ok := want[k]
		switch {
		case !ok && !webhookInDeploy && (g.GetLabels()["app.kubernetes.io/name"] == "probed-webhook" ||
			strings.HasPrefix(g.GetName(), "probed-webhook")):
			// deploy/ does not include the webhook yet.
		case !ok:
			t.Errorf("%s: the chart renders %s, which kustomize does not", what, k)
		case !reflect.DeepEqual(collapseSpaces(g.Object), collapseSpaces(w.Object)):
			t.Errorf("%s: %s differs from kustomize's (- kustomize, + chart):\n%s",
				what, k, lineDiff(toYAML(w), toYAML(g)))
		}
	}
	for _, k := range sortedKeys(want) {
		if got[k] == nil {
			t.Errorf("%s: kustomize renders %s, the chart does not", what, k)
		}
	}
}

// flagSamples gives each flag of values.schema.json (generated from
// probed's flag set) a value its schema accepts and probed parses.
func flagSamples(t *testing.T) map[string]string {
	t.Helper()
	b, err := os.ReadFile(chartDir + "/values.schema.json")
	if err != nil {
		t.Fatal(err)
	}
	var schema struct {
		Properties struct {
			Flags struct {
				Properties map[string]struct {
					Type    []string `json:"type"`
					Enum    []any    `json:"enum"`
					Pattern string   `json:"pattern"`
					Minimum *int     `json:"minimum"`
					AnyOf   []struct {
						Pattern string `json:"pattern"`
					} `json:"anyOf"`
				} `json:"properties"`
			} `json:"flags"`
		} `json:"properties"`
	}
	if err := yaml.Unmarshal(b, &schema); err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for name, p := range schema.Properties.Flags.Properties {
		for _, a := range p.AnyOf { // a duration that may be 0: a string, or the number 0
			p.Pattern += a.Pattern
		}
		switch {
		case len(p.Enum) > 0:
			out[name] = fmt.Sprint(p.Enum[0])
		case slices.Contains(p.Type, "boolean"):
			out[name] = "false"
		case slices.Contains(p.Type, "integer"):
			out[name] = "7"
		case strings.Contains(p.Pattern, "ms|s|m|h"):
			out[name] = "45s"
		case p.Type == nil: // a number: a number or a string that spells one
			out[name] = "2.5"
		default:
			out[name] = "x"
		}
	}
	out["vmodule"] = "worker=5"
	out["health-bind-address"] = "127.0.0.1:9810"
	if len(out) < 20 {
		t.Fatalf("only %d flags in values.schema.json", len(out))
	}
	return out
}

// Every flag values.schema.json types (cmd/probed's TestChartValuesSchema
// keeps it equal to probed's flags, and values.yaml too), set at once: the
// chart passes each as --name=value, and probed parses them all (with
// --version it exits after parsing, before it checks their values). An
// unknown flag is refused.
func TestChartCoversEveryFlag(t *testing.T) {
	t.Parallel()
	out, err := exec.Command(helmPath(t), "template", "probed", chartDir, "--set", "image.tag=dev", "--set", "flags.no-such-flag=1").CombinedOutput()
	if err == nil || !strings.Contains(string(out), "no-such-flag") {
		t.Errorf("helm template with flags.no-such-flag: err = %v, want the schema's refusal\n%s", err, out)
	}
	samples := flagSamples(t)
	var sets, want []string
	for _, f := range sortedKeys(samples) {
		v := samples[f]
		sets = append(sets, fmt.Sprintf("flags.%s=%s", f, v))
		arg := "--" + f + "=" + v
		if f == "v" {
			arg = "-v=" + v
		}
		want = append(want, arg)
	}
	sets = append(sets, "extraArgs[0]=--extra")
	ds := renderedDaemonSet(t, helmTemplate(t, "probed-system", sets...))
	args := ds.Spec.Template.Spec.Containers[0].Args
	for _, w := range want {
		if !slices.Contains(args, w) {
			t.Errorf("rendered args lack %q: %q", w, args)
		}
	}
	if len(args) != len(want)+1 || args[len(args)-1] != "--extra" {
		t.Errorf("rendered args %q: want the %d flags, then extraArgs", args, len(want))
	}
	// probed parses what the chart renders (the placeholders fail its
	// validation, which --version skips; enums are checked as they are parsed).
	out, err = exec.Command(probedBin, append(slices.Clone(args[:len(args)-1]), "--version")...).CombinedOutput()
	if err != nil {
		t.Errorf("probed rejects the rendered flags %q: %v\n%s", args, err, out)
	}
}

// What the schema refuses, helm refuses before anything reaches the
// cluster: unknown keys at every level, and flag values probed would
// refuse at start (a bad enum, a duration without its unit, a count out of
// range, --vmodule with JSON logs).
func TestChartSchemaRefuses(t *testing.T) {
	t.Parallel()
	for _, set := range [][]string{
		{"resource.limits.cpu=1"}, {"webhook.replica=3"}, {"image.registy=x"}, {"monitoring.dashbord.enabled=true"},
		{"affinity.nodeAfinity.x=1"}, {"tolerations[0].efect=NoSchedule"}, {"resources.limit.memory=1Gi"},
		{"flags.runtime-type=podman"}, {"flags.status-resync=60"}, {"flags.status-resync=0s"}, {"flags.max-concurrent-execs=0"},
		{"flags.kube-api-qps=0"}, {"flags.probe-source=Spec"}, {"flags.v=-1"}, {"flags.logging-format=xml"},
		{"flags.logging-format=json", "flags.vmodule=worker=5"}, {"webhook.replicas=0"}, {"image.pullPolicy=Sometimes"},
		{"webhook.certManager.issuerRef.kind=Cert"}, {"flags.exec-slot-max-hold=-1s"}, {"flags.log-flush-frequency=0s"},
		{"global.imageRegistry=1"}, {"image.digest=abc"}, {"image.tag=a:b"}, {"shadow.metricsPort=0"},
		{"monitoring.relabelings[0].action=Delete"}, {"probeTLS.kubeletPodsDir=var/lib/kubelet/pods"}, {"probeTLS.podVolume=true"},
	} {
		args := []string{"template", "probed", chartDir, "--set", "image.tag=dev"}
		for _, s := range set {
			args = append(args, "--set", s)
		}
		if out, err := exec.Command(helmPath(t), args...).CombinedOutput(); err == nil {
			t.Errorf("helm template --set %v rendered:\n%.300s", set, out)
		}
	}
}

// renderedDaemonSet returns the one DaemonSet in objs.
func renderedDaemonSet(t *testing.T, objs []*unstructured.Unstructured) *appsv1.DaemonSet {
	t.Helper()
	var ds *appsv1.DaemonSet
	for _, o := range objs {
		if o.GetKind() != "DaemonSet" {
			continue
		}
		if ds != nil {
			t.Fatal("two DaemonSets rendered")
		}
		ds = &appsv1.DaemonSet{}
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(o.Object, ds); err != nil {
			t.Fatal(err)
		}
	}
	if ds == nil || len(ds.Spec.Template.Spec.Containers) != 1 {
		t.Fatalf("no DaemonSet with one container rendered")
	}
	return ds
}

// hostMounts maps each hostPath mount of ds's container to its host path
// and type.
func hostMounts(ds *appsv1.DaemonSet) map[string]string {
	vols := map[string]string{}
	for _, v := range ds.Spec.Template.Spec.Volumes {
		if v.HostPath != nil && v.HostPath.Type != nil {
			vols[v.Name] = v.HostPath.Path + " " + string(*v.HostPath.Type)
		}
	}
	out := map[string]string{}
	for _, m := range ds.Spec.Template.Spec.Containers[0].VolumeMounts {
		out[m.MountPath] = vols[m.Name]
	}
	return out
}

// The runtime socket's directory is mounted at its own path; the exec FIFO
// directory too when probed may use containerd's API from elsewhere than
// /run/containerd (k3s); the metrics port follows --metrics-bind-address.
// The kustomize overlays for CRI-O and k3s mount the same.
func TestChartAndOverlaysRuntimeSocket(t *testing.T) {
	t.Parallel()
	const crio, k3s = "unix:///var/run/crio/crio.sock", "unix:///run/k3s/containerd/containerd.sock"
	cases := []struct {
		name       string
		ds         *appsv1.DaemonSet
		endpoint   string
		crioType   bool
		wantMounts map[string]string
	}{
		{"chart defaults", renderedDaemonSet(t, helmTemplate(t, "p")), "unix:///run/containerd/containerd.sock", false,
			map[string]string{"/run/containerd": "/run/containerd Directory"}},
		{"chart for CRI-O", renderedDaemonSet(t, helmTemplate(t, "p", "flags.runtime-endpoint="+crio, "flags.runtime-type=cri")), crio, true,
			map[string]string{"/var/run/crio": "/var/run/crio Directory"}},
		{"overlays/crio", renderedDaemonSet(t, kustomize(t, "../../overlays/crio")), crio, true,
			map[string]string{"/var/run/crio": "/var/run/crio Directory"}},
		{"chart for k3s", renderedDaemonSet(t, helmTemplate(t, "p", "flags.runtime-endpoint="+k3s)), k3s, false,
			map[string]string{"/run/k3s/containerd": "/run/k3s/containerd Directory", "/run/containerd/fifo": "/run/containerd/fifo DirectoryOrCreate"}},
		{"overlays/k3s", renderedDaemonSet(t, kustomize(t, "../../overlays/k3s")), k3s, false,
			map[string]string{"/run/k3s/containerd": "/run/k3s/containerd Directory", "/run/containerd/fifo": "/run/containerd/fifo DirectoryOrCreate"}},
	}
	for _, c := range cases {
		args := c.ds.Spec.Template.Spec.Containers[0].Args
		if n := len(slices.DeleteFunc(slices.Clone(args), func(a string) bool { return !strings.HasPrefix(a, "--runtime-endpoint=") })); n != 1 ||
			!slices.Contains(args, "--runtime-endpoint="+c.endpoint) {
			t.Errorf("%s: args %q, want --runtime-endpoint=%s once", c.name, args, c.endpoint)
		}
		if got := slices.Contains(args, "--runtime-type=cri"); got != c.crioType {
			t.Errorf("%s: args %q: --runtime-type=cri is there: %v, want %v", c.name, args, got, c.crioType)
		}
		if got := hostMounts(c.ds); !reflect.DeepEqual(got, c.wantMounts) {
			t.Errorf("%s: host mounts %v, want %v", c.name, got, c.wantMounts)
		}
	}

	// The kubelet's probes go to the loopback health listener, whatever
	// the metrics port; without one, to the metrics port over TLS.
	ds := renderedDaemonSet(t, helmTemplate(t, "p", "flags.metrics-bind-address=127.0.0.1:19809"))
	c := ds.Spec.Template.Spec.Containers[0]
	for _, p := range []*corev1.Probe{c.LivenessProbe, c.ReadinessProbe} {
		if g := p.HTTPGet; g.Host != "127.0.0.1" || g.Port.IntValue() != 9810 || g.Scheme != corev1.URISchemeHTTP {
			t.Errorf("--metrics-bind-address=127.0.0.1:19809: probe %+v, want http://127.0.0.1:9810", g)
		}
	}
	if c.Ports[0].ContainerPort != 19809 || ds.Spec.Template.Annotations["prometheus.io/port"] != "19809" {
		t.Errorf("--metrics-bind-address=127.0.0.1:19809: port %d, annotation %q", c.Ports[0].ContainerPort,
			ds.Spec.Template.Annotations["prometheus.io/port"])
	}
	ds = renderedDaemonSet(t, helmTemplate(t, "p", "flags.metrics-bind-address=127.0.0.1:19809", "flags.health-bind-address="))
	c = ds.Spec.Template.Spec.Containers[0]
	for _, p := range []*corev1.Probe{c.LivenessProbe, c.ReadinessProbe} {
		if g := p.HTTPGet; g.Host != "" || g.Port.IntValue() != 19809 || g.Scheme != corev1.URISchemeHTTPS {
			t.Errorf("no --health-bind-address: probe %+v, want https on port 19809", g)
		}
	}
}

// The real API server takes every object the chart renders (defaults; the
// webhook and monitoring on, in another namespace) and the kustomize
// overlays render, with a server-side dry run: defaulting, validation,
// CEL compilation of the admission policies, admission. PodMonitor and
// PrometheusRule go to stand-in CRDs (testdata/chart/monitoring-crds.yaml
// says why).
func TestChartServerSideDryRun(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	installMonitoringCRDs(ctx, t)

	cases := []struct {
		name string
		ns   string
		objs []*unstructured.Unstructured
	}{
		{"chart defaults", "chart-defaults", helmTemplate(t, "chart-defaults")},
		{"chart with webhook, monitoring, shadow and the values charts are used with", "chart-all",
			helmTemplate(t, "chart-all", "webhook.enabled=true", "monitoring.enabled=true", "namespace.create=true",
				"fullnameOverride=probed-all", "shadow.enabled=true", "serviceAccount.annotations.example\\.com/role=probed", "probeTLS.podVolumes=true",
				"podSecurityContext.fsGroup=65532", "securityContext.readOnlyRootFilesystem=true",
				"webhook.replicas=1", "webhook.podAnnotations.a=b", "webhook.podLabels.team=x", "webhook.priorityClassName=system-cluster-critical",
				"webhook.topologySpreadConstraints[0].maxSkew=1", "webhook.topologySpreadConstraints[0].topologyKey=topology.kubernetes.io/zone",
				"webhook.topologySpreadConstraints[0].whenUnsatisfiable=ScheduleAnyway",
				"monitoring.scrapeTimeout=10s", "monitoring.relabelings[0].action=labeldrop", "monitoring.relabelings[0].regex=pod_uid",
				"monitoring.metricRelabelings[0].action=drop", "monitoring.metricRelabelings[0].sourceLabels[0]=__name__",
				"monitoring.metricRelabelings[0].regex=go_.*")},
		{"deploy/", "probed-system", kustomize(t, "../../deploy")},
		{"overlays/crio", "probed-system", kustomize(t, "../../overlays/crio")},
		{"overlays/k3s", "probed-system", kustomize(t, "../../overlays/k3s")},
		{"overlays/shadow", "probed-system", kustomize(t, "../../overlays/shadow")},
		{"deploy/ with deploy/probe-tls", "probed-system", kustomize(t, componentWrapper(t, "probe-tls"))},
		{"deploy/ with deploy/pod-source-kubelet", "probed-system", kustomize(t, componentWrapper(t, "pod-source-kubelet"))},
	}
	for _, c := range cases {
		// A dry run creates no namespace: make it for real.
		if err := cp.EnsureNamespace(ctx, c.ns); err != nil {
			t.Fatal(err)
		}
		if len(c.objs) < 5 {
			t.Errorf("%s: only %d objects rendered", c.name, len(c.objs))
		}
		if err := dryRunApply(ctx, c.objs); err != nil {
			t.Errorf("%s: server-side dry run:\n%v", c.name, err)
		}
	}
	// The dry run judges: a port out of range is refused.
	bad := helmTemplate(t, "chart-defaults", "flags.metrics-bind-address=:70000")
	if err := dryRunApply(ctx, bad); err == nil || !strings.Contains(err.Error(), "70000") {
		t.Errorf("--metrics-bind-address=:70000 rendered a port the dry run took: err = %v", err)
	}
	// What a dry run promises: nothing was stored.
	if _, err := client.AppsV1().DaemonSets("chart-defaults").Get(ctx, "probed", metav1.GetOptions{}); err == nil {
		t.Error("the dry run stored the DaemonSet")
	}
}

// installMonitoringCRDs creates the stand-in CRDs (once per control plane)
// and waits until the API server serves them.
func installMonitoringCRDs(ctx context.Context, t *testing.T) {
	t.Helper()
	b, err := os.ReadFile("testdata/chart/monitoring-crds.yaml")
	if err != nil {
		t.Fatal(err)
	}
	crds, err := decodeObjects(b)
	if err != nil {
		t.Fatal(err)
	}
	_, dyn, err := restClients()
	if err != nil {
		t.Fatal(err)
	}
	crdRes := schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}
	for _, crd := range crds {
		if _, err := dyn.Resource(crdRes).Apply(ctx, crd.GetName(), crd, metav1.ApplyOptions{FieldManager: "probed-chart-test", Force: true}); err != nil {
			t.Fatalf("CRD %s: %v", crd.GetName(), err)
		}
	}
	err = wait.PollUntilContextCancel(ctx, 200*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		rl, err := client.Discovery().ServerResourcesForGroupVersion("monitoring.coreos.com/v1")
		if err != nil {
			return false, nil
		}
		n := 0
		for _, r := range rl.APIResources {
			if r.Name == "podmonitors" || r.Name == "prometheusrules" {
				n++
			}
		}
		return n == 2, nil
	})
	if err != nil {
		t.Fatalf("monitoring.coreos.com/v1 never served: %v", err)
	}
}
