//go:build integration

package integration

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
)

// The chart as charts are used: the values people reach for in other
// charts, two releases side by side, a subchart, one webhook replica, the
// image from a registry, shadow mode.

// helmFails renders the chart with sets and returns helm's error output;
// it fails the test if helm renders.
func helmFails(t *testing.T, args ...string) string {
	t.Helper()
	out, err := exec.Command(helmPath(t), append([]string{"template", "probed", chartDir}, args...)...).CombinedOutput()
	if err == nil {
		t.Errorf("helm template %v rendered", args)
	}
	return string(out)
}

// find returns the object of kind and name in objs, or nil.
func find(objs []*unstructured.Unstructured, kind, name string) *unstructured.Unstructured {
	for _, o := range objs {
		if o.GetKind() == kind && o.GetName() == name {
			return o
		}
	}
	return nil
}

// daemonSet converts the DaemonSet name in objs.
func daemonSet(t *testing.T, objs []*unstructured.Unstructured, name string) *appsv1.DaemonSet {
	t.Helper()
	o := find(objs, "DaemonSet", name)
	if o == nil {
		t.Fatalf("no DaemonSet %s rendered", name)
	}
	ds := &appsv1.DaemonSet{}
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(o.Object, ds); err != nil {
		t.Fatal(err)
	}
	return ds
}

// selects reports whether a matchLabels selector selects pods labelled so.
func selects(selector map[string]string, labels map[string]string) bool {
	for k, v := range selector {
		if labels[k] != v {
			return false
		}
	}
	return len(selector) > 0
}

// Two releases in one namespace, each with the webhook, monitoring and
// shadow mode, the second with a fullnameOverride: no object of one has
// the other's kind, namespace and name; each one's webhook serves its own
// Service, Secret and configurations; each Service, PodDisruptionBudget and
// PodMonitor selects its own release's pods only.
func TestChartTwoReleasesOneNamespace(t *testing.T) {
	t.Parallel()
	const ns = "shared"
	common := []string{"image.tag=dev", "monitoring.enabled=true", "shadow.enabled=true", "webhook.certManager.enabled=false"}
	first := helmTemplateRelease(t, "probed", ns, common...)
	second := helmTemplateRelease(t, "canary", ns, append(common, "fullnameOverride=probed-canary", "shadow.metricsPort=9811",
		"flags.metrics-bind-address=:9812")...)
	byKey(t, append(slices.Clone(first), second...), "two releases") // fails on a name twice

	for _, rel := range []struct {
		name, wh string
		objs     []*unstructured.Unstructured
	}{{"probed", "probed-webhook", first}, {"canary", "probed-canary-webhook", second}} {
		dep := find(rel.objs, "Deployment", rel.wh)
		if dep == nil {
			t.Fatalf("%s: no Deployment %s", rel.name, rel.wh)
		}
		args, _, _ := unstructured.NestedSlice(dep.Object, "spec", "template", "spec", "containers")
		webhookArgs := args[0].(map[string]any)["args"].([]any)
		named := func(flag, want string) {
			t.Helper()
			has := slices.Contains(webhookArgs, any("--"+flag+"="+want))
			if isDefault := want == "probed-webhook" || want == "probed-webhook-certs"; !has && !isDefault {
				t.Errorf("%s: the webhook's args %v lack --%s=%s", rel.name, webhookArgs, flag, want)
			}
		}
		named("service-name", rel.wh)
		named("secret-name", rel.wh+"-certs")
		named("mutating-webhook-configuration", rel.wh)
		named("validating-webhook-configuration", rel.wh)
		for _, kind := range []string{"Service", "Secret", "MutatingWebhookConfiguration", "ValidatingWebhookConfiguration", "PodDisruptionBudget"} {
			name := rel.wh
			if kind == "Secret" {
				name += "-certs"
			}
			if find(rel.objs, kind, name) == nil {
				t.Errorf("%s: no %s %s", rel.name, kind, name)
			}
		}
		mwc := find(rel.objs, "MutatingWebhookConfiguration", rel.wh)
		whs, _, _ := unstructured.NestedSlice(mwc.Object, "webhooks")
		for _, w := range whs {
			if svc, _, _ := unstructured.NestedString(w.(map[string]any), "clientConfig", "service", "name"); svc != rel.wh {
				t.Errorf("%s: the mutating webhook calls Service %s, want %s", rel.name, svc, rel.wh)
			}
		}

		// Selectors: this release's pods, never the other's.
		other := first
		if rel.name == "probed" {
			other = second
		}
		podLabels := func(objs []*unstructured.Unstructured) [][]map[string]string {
			var ds, wh []map[string]string
			for _, o := range objs {
				l, _, _ := unstructured.NestedStringMap(o.Object, "spec", "template", "metadata", "labels")
				switch o.GetKind() {
				case "DaemonSet":
					ds = append(ds, l)
				case "Deployment":
					wh = append(wh, l)
				}
			}
			return [][]map[string]string{ds, wh}
		}
		own, others := podLabels(rel.objs), podLabels(other)
		for _, sel := range []struct {
			kind, name string
			path       []string
			pods       int // 0: the DaemonSets', 1: the webhook's
		}{
			{"Service", rel.wh, []string{"spec", "selector"}, 1},
			{"PodDisruptionBudget", rel.wh, []string{"spec", "selector", "matchLabels"}, 1},
			{"PodMonitor", strings.TrimSuffix(rel.wh, "-webhook"), []string{"spec", "selector", "matchLabels"}, 0},
			{"PodMonitor", rel.wh, []string{"spec", "selector", "matchLabels"}, 1},
		} {
			o := find(rel.objs, sel.kind, sel.name)
			if o == nil {
				t.Errorf("%s: no %s %s", rel.name, sel.kind, sel.name)
				continue
			}
			m, _, _ := unstructured.NestedStringMap(o.Object, sel.path...)
			for _, l := range own[sel.pods] {
				if !selects(m, l) {
					t.Errorf("%s: %s %s selector %v misses its own pods %v", rel.name, sel.kind, sel.name, m, l)
				}
			}
			for _, l := range others[sel.pods] {
				if selects(m, l) {
					t.Errorf("%s: %s %s selector %v selects the other release's pods %v", rel.name, sel.kind, sel.name, m, l)
				}
			}
		}
	}
}

// As a subchart: Helm passes the parent's globals (any of them), which the
// schema lets through; global.imageRegistry reaches both images.
func TestChartAsSubchart(t *testing.T) {
	t.Parallel()
	parent := filepath.Join(t.TempDir(), "platform")
	if out, err := exec.Command("mkdir", "-p", filepath.Join(parent, "charts")).CombinedOutput(); err != nil {
		t.Fatalf("%v %s", err, out)
	}
	if out, err := exec.Command("cp", "-r", chartDir, filepath.Join(parent, "charts", "probed")).CombinedOutput(); err != nil {
		t.Fatalf("cp: %v\n%s", err, out)
	}
	write := func(name, content string) {
		if err := os.WriteFile(filepath.Join(parent, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("Chart.yaml", "apiVersion: v2\nname: platform\nversion: 1.0.0\ndependencies:\n- name: probed\n  version: \">=0.0.0\"\n")
	write("values.yaml", "global:\n  imageRegistry: mirror.example.com/platform\n  storageClass: fast\n  team: infra\n"+
		"probed:\n  image:\n    tag: 0.2.0\n")
	out, err := exec.Command(helmPath(t), "template", "platform", parent, "--namespace", "platform").Output()
	if err != nil {
		var stderr []byte
		if ee, ok := err.(*exec.ExitError); ok {
			stderr = ee.Stderr
		}
		t.Fatalf("helm template of a parent chart with probed as a subchart: %v\n%s", err, stderr)
	}
	objs, err := decodeObjects(out)
	if err != nil {
		t.Fatal(err)
	}
	imgs := renderedImages(objs)
	want := map[string]string{
		"DaemonSet/platform/probed probed":           "mirror.example.com/platform/probed:0.2.0",
		"Deployment/platform/probed-webhook webhook": "mirror.example.com/platform/probed-webhook:0.2.0",
	}
	if !reflect.DeepEqual(imgs, want) {
		t.Errorf("images %v, want %v", imgs, want)
	}
}

// The image reference: registry, repository, tag or digest, global
// registry over both; a tag left to the appVersion dev stops the render
// with what to do.
func TestChartImageReferences(t *testing.T) {
	t.Parallel()
	out := helmFails(t, "--namespace", "x")
	for _, want := range []string{"no image tag set", `appVersion is "dev"`, "make push", "image.tag"} {
		if !strings.Contains(out, want) {
			t.Errorf("the render without a tag fails with %q, which lacks %q", out, want)
		}
	}
	// Only the webhook left at dev: it fails too, naming webhook.image.
	if out := helmFails(t, "--set", "image.digest=sha256:"+strings.Repeat("a", 64)); !strings.Contains(out, "webhook.image: no image tag set") {
		t.Errorf("a digest for probed alone: %s", out)
	}
	digest := "sha256:" + strings.Repeat("b", 64)
	for _, c := range []struct {
		sets []string
		want map[string]string
	}{
		{[]string{"image.registry=reg.example.com:5000/team", "image.tag=0.2.0"},
			map[string]string{"probed": "reg.example.com:5000/team/probed:0.2.0", "webhook": "reg.example.com:5000/team/probed-webhook:0.2.0"}},
		{[]string{"image.registry=reg.example.com/team", "image.tag=0.2.0", "global.imageRegistry=mirror.example.com"},
			map[string]string{"probed": "mirror.example.com/probed:0.2.0", "webhook": "mirror.example.com/probed-webhook:0.2.0"}},
		{[]string{"image.registry=reg.example.com", "image.tag=0.2.0", "image.digest=" + digest, "webhook.image.digest=" + digest},
			map[string]string{"probed": "reg.example.com/probed@" + digest, "webhook": "reg.example.com/probed-webhook@" + digest}},
		{[]string{"image.tag=0.2.0", "webhook.image.registry=other.example.com", "webhook.image.repository=hooks/wh", "webhook.image.tag=0.2.1"},
			map[string]string{"probed": "probed:0.2.0", "webhook": "other.example.com/hooks/wh:0.2.1"}},
	} {
		imgs := renderedImages(helmTemplateRelease(t, "probed", "x", c.sets...))
		got := map[string]string{"probed": imgs["DaemonSet/x/probed probed"], "webhook": imgs["Deployment/x/probed-webhook webhook"]}
		if !reflect.DeepEqual(got, c.want) {
			t.Errorf("%v: images %v, want %v", c.sets, got, c.want)
		}
	}
}

// At one webhook replica no PodDisruptionBudget: minAvailable 1 of 1 would
// block every drain of that replica's node. At two, one must stay.
func TestChartWebhookReplicas(t *testing.T) {
	t.Parallel()
	if pdb := find(helmTemplate(t, "x", "webhook.replicas=1"), "PodDisruptionBudget", "probed-webhook"); pdb != nil {
		t.Errorf("webhook.replicas=1 renders a PodDisruptionBudget: %v", pdb.Object["spec"])
	}
	pdb := find(helmTemplate(t, "x", "webhook.replicas=2"), "PodDisruptionBudget", "probed-webhook")
	if pdb == nil || fmt.Sprint(pdb.Object["spec"].(map[string]any)["minAvailable"]) != "1" {
		t.Errorf("webhook.replicas=2: PodDisruptionBudget %v", pdb)
	}
}

// The values charts like cert-manager's and kube-state-metrics' have, each
// where it belongs.
func TestChartCommonValues(t *testing.T) {
	t.Parallel()
	objs := helmTemplate(t, "x", "nameOverride=prober", "serviceAccount.create=false", "serviceAccount.name=node-prober",
		"podSecurityContext.fsGroup=65532", "securityContext.seLinuxOptions.type=spc_t",
		"webhook.podAnnotations.a=b", "webhook.podLabels.team=infra", "webhook.priorityClassName=high",
		"webhook.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms[0].matchExpressions[0].key=pool",
		"webhook.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms[0].matchExpressions[0].operator=Exists",
		"monitoring.enabled=true", "monitoring.rules.enabled=false", "monitoring.dashboard.namespace=grafana",
		"monitoring.scrapeTimeout=15s", "monitoring.relabelings[0].action=labeldrop", "monitoring.relabelings[0].regex=pod_uid")
	if find(objs, "ServiceAccount", "node-prober") != nil || find(objs, "ServiceAccount", "prober") != nil {
		t.Error("serviceAccount.create=false rendered probed's ServiceAccount")
	}
	ds := daemonSet(t, objs, "prober")
	if ds.Spec.Template.Spec.ServiceAccountName != "node-prober" || ds.Spec.Template.Spec.SecurityContext == nil ||
		*ds.Spec.Template.Spec.SecurityContext.FSGroup != 65532 {
		t.Errorf("the DaemonSet's pod: account %q, security context %+v", ds.Spec.Template.Spec.ServiceAccountName, ds.Spec.Template.Spec.SecurityContext)
	}
	sc := ds.Spec.Template.Spec.Containers[0].SecurityContext
	if sc == nil || sc.SELinuxOptions == nil || sc.SELinuxOptions.Type != "spc_t" || sc.RunAsUser == nil || *sc.RunAsUser != 0 ||
		!slices.Equal(sc.Capabilities.Add, []corev1.Capability{"KILL"}) {
		t.Errorf("the container's security context %+v: want the defaults with seLinuxOptions added", sc)
	}
	if ds.Labels["app.kubernetes.io/name"] != "probed" || ds.Spec.Template.Labels["app.kubernetes.io/instance"] != "probed" ||
		ds.Spec.Template.Labels["app.kubernetes.io/component"] != "daemon" {
		t.Errorf("labels %v, pod labels %v", ds.Labels, ds.Spec.Template.Labels)
	}
	crb := find(objs, "ClusterRoleBinding", "prober")
	subjects, _, _ := unstructured.NestedSlice(crb.Object, "subjects")
	if len(subjects) != 1 || subjects[0].(map[string]any)["name"] != "node-prober" {
		t.Errorf("the ClusterRoleBinding binds %v", subjects)
	}
	dep := find(objs, "Deployment", "prober-webhook")
	tmpl, _, _ := unstructured.NestedMap(dep.Object, "spec", "template")
	meta, spec := tmpl["metadata"].(map[string]any), tmpl["spec"].(map[string]any)
	if meta["annotations"].(map[string]any)["a"] != "b" || meta["labels"].(map[string]any)["team"] != "infra" ||
		meta["labels"].(map[string]any)["app.kubernetes.io/component"] != "webhook" || spec["priorityClassName"] != "high" {
		t.Errorf("the webhook's pod template: %v", tmpl)
	}
	if aff := spec["affinity"].(map[string]any); aff["podAntiAffinity"] != nil || aff["nodeAffinity"] == nil {
		t.Errorf("webhook.affinity: %v, want it in place of the default spread", aff)
	}
	if find(objs, "PrometheusRule", "prober") != nil {
		t.Error("monitoring.rules.enabled=false rendered the PrometheusRule")
	}
	if cm := find(objs, "ConfigMap", "prober-grafana-dashboard"); cm == nil || cm.GetNamespace() != "grafana" {
		t.Errorf("the dashboard ConfigMap: %v", cm)
	}
	pm := find(objs, "PodMonitor", "prober")
	eps, _, _ := unstructured.NestedSlice(pm.Object, "spec", "podMetricsEndpoints")
	ep := eps[0].(map[string]any)
	if ep["scrapeTimeout"] != "15s" || len(ep["relabelings"].([]any)) != 2 {
		t.Errorf("the PodMonitor's endpoint: %v", ep)
	}
	objs = helmTemplate(t, "x", "monitoring.enabled=true", "monitoring.podMonitor.enabled=false")
	for _, o := range objs {
		if o.GetKind() == "PodMonitor" || strings.Contains(o.GetName(), "metrics-scraper") {
			t.Errorf("monitoring.podMonitor.enabled=false rendered %s", objKey(o))
		}
	}
	if find(objs, "PrometheusRule", "probed") == nil {
		t.Error("monitoring.podMonitor.enabled=false took the PrometheusRule with it")
	}
	// The supported range: Kubernetes 1.35 and later.
	if out := helmFails(t, "--set", "image.tag=dev", "--kube-version", "1.34.9"); !strings.Contains(out, "kubeVersion") &&
		!strings.Contains(out, "incompatible") {
		t.Errorf("--kube-version 1.34.9: %s", out)
	}
	helmTemplate(t, "x", "image.tag=dev") // the default (1.37) renders
}

// shadow.enabled renders the shadow DaemonSet that overlays/shadow
// renders (object for object, as TestChartMatchesKustomize compares the
// rest), beside probed's own, which it leaves as it is: the pod spec's
// probes, nothing written, its own port and selector.
func TestChartShadow(t *testing.T) {
	t.Parallel()
	plain := helmTemplate(t, "probed-system")
	objs := helmTemplate(t, "probed-system", "shadow.enabled=true")
	if !reflect.DeepEqual(find(plain, "DaemonSet", "probed").Object, find(objs, "DaemonSet", "probed").Object) {
		t.Error("shadow.enabled changed probed's own DaemonSet")
	}
	base := byKey(t, kustomize(t, "../../overlays/shadow"), "overlays/shadow")
	delete(base, "Namespace//probed-system")
	compareRender(t, "shadow.enabled against overlays/shadow", objs, base, true)

	ds := daemonSet(t, objs, "probed-shadow")
	c := ds.Spec.Template.Spec.Containers[0]
	for _, want := range []string{"--probe-source=spec", "--dry-run=true", "--metrics-bind-address=:9811", "--health-bind-address=127.0.0.1:9812"} {
		if !slices.Contains(c.Args, want) {
			t.Errorf("the shadow's args %q lack %s", c.Args, want)
		}
	}
	// Both use the host's network: ports of its own beside probed's 9809
	// (metrics) and 9810 (health).
	if c.Ports[0].ContainerPort != 9811 || c.ReadinessProbe.HTTPGet.Port.IntValue() != 9812 ||
		c.LivenessProbe.HTTPGet.Port.IntValue() != 9812 || ds.Spec.Template.Annotations["prometheus.io/port"] != "9811" {
		t.Errorf("the shadow's port %d, probe %v, annotation %q", c.Ports[0].ContainerPort, c.ReadinessProbe.HTTPGet.Port,
			ds.Spec.Template.Annotations["prometheus.io/port"])
	}
	main := daemonSet(t, objs, "probed")
	if selects(main.Spec.Selector.MatchLabels, ds.Spec.Template.Labels) && selects(ds.Spec.Selector.MatchLabels, main.Spec.Template.Labels) {
		t.Errorf("each DaemonSet selects the other's pods: %v, %v", main.Spec.Selector.MatchLabels, ds.Spec.Selector.MatchLabels)
	}
	if selects(ds.Spec.Selector.MatchLabels, main.Spec.Template.Labels) {
		t.Errorf("the shadow's selector %v selects probed's pods %v", ds.Spec.Selector.MatchLabels, main.Spec.Template.Labels)
	}
	// A node selector of its own, and a host:port kept.
	ds = daemonSet(t, helmTemplate(t, "probed-system", "shadow.enabled=true", "shadow.nodeSelector.probed\\.io/shadow=enabled",
		"flags.metrics-bind-address=127.0.0.1:9809"), "probed-shadow")
	if !reflect.DeepEqual(ds.Spec.Template.Spec.NodeSelector, map[string]string{"probed.io/shadow": "enabled"}) ||
		!slices.Contains(ds.Spec.Template.Spec.Containers[0].Args, "--metrics-bind-address=127.0.0.1:9811") {
		t.Errorf("shadow.nodeSelector and a host in --metrics-bind-address: %v, %q", ds.Spec.Template.Spec.NodeSelector,
			ds.Spec.Template.Spec.Containers[0].Args)
	}
}

// chartMatchesComponent checks that the chart with set renders what deploy/
// with the kustomize component renders (deploy/'s Namespace aside), and
// returns both renders.
func chartMatchesComponent(t *testing.T, component, set string) (wrapped, chart []*unstructured.Unstructured) {
	t.Helper()
	base := byKey(t, kustomize(t, "../../deploy"), "deploy/")
	webhookInDeploy := base["Deployment/probed-system/probed-webhook"] != nil
	wrapped = kustomize(t, componentWrapper(t, component))
	want := byKey(t, wrapped, "deploy/ with "+component)
	delete(want, "Namespace//probed-system")
	chart = helmTemplate(t, "probed-system", set)
	compareRender(t, set+" against deploy/"+component, chart, want, webhookInDeploy)
	return wrapped, chart
}

// componentWrapper is a kustomization of deploy/ with the component
// deploy/<component>, beside a link to this checkout, as a user's wrapper
// has them; it returns the wrapper's directory.
func componentWrapper(t *testing.T, component string) string {
	t.Helper()
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	if err := os.Symlink(root, filepath.Join(dir, "probed")); err != nil {
		t.Fatal(err)
	}
	my := filepath.Join(dir, "my-probed")
	if err := os.MkdirAll(my, 0o755); err != nil {
		t.Fatal(err)
	}
	k := "resources:\n- ../probed/deploy\ncomponents:\n- ../probed/deploy/" + component + "\n"
	if err := os.WriteFile(filepath.Join(my, "kustomization.yaml"), []byte(k), 0o644); err != nil {
		t.Fatal(err)
	}
	return my
}

// checkPodVolumes checks that ds reads pod volumes from the host's dir:
// --pod-volumes-dir=dir once, and dir mounted at its own path from a
// hostPath Directory, read-only, with HostToContainer propagation (the
// kubelet's tmpfs mounts of secret volumes come after probed starts).
func checkPodVolumes(t *testing.T, what string, ds *appsv1.DaemonSet, dir string) {
	t.Helper()
	c := ds.Spec.Template.Spec.Containers[0]
	var flags []string
	for _, a := range c.Args {
		if strings.HasPrefix(a, "--pod-volumes-dir") {
			flags = append(flags, a)
		}
	}
	if want := []string{"--pod-volumes-dir=" + dir}; !reflect.DeepEqual(flags, want) {
		t.Errorf("%s: args %q: want %q", what, c.Args, want)
	}
	if got := hostMounts(ds)[dir]; got != dir+" Directory" {
		t.Errorf("%s: %s is mounted from %q, want the host's %s, a Directory", what, dir, got, dir)
	}
	for _, m := range c.VolumeMounts {
		if m.MountPath == dir && (!m.ReadOnly || m.MountPropagation == nil || *m.MountPropagation != corev1.MountPropagationHostToContainer) {
			t.Errorf("%s: mount of %s: readOnly %v, propagation %v; want read-only, HostToContainer", what, dir, m.ReadOnly, m.MountPropagation)
		}
	}
}

// noPodVolumes checks that ds neither mounts dir nor passes --pod-volumes-dir.
func noPodVolumes(t *testing.T, what string, ds *appsv1.DaemonSet, dir string) {
	t.Helper()
	c := ds.Spec.Template.Spec.Containers[0]
	if slices.ContainsFunc(c.Args, func(a string) bool { return strings.HasPrefix(a, "--pod-volumes-dir") }) {
		t.Errorf("%s: args %q pass --pod-volumes-dir", what, c.Args)
	}
	if m, ok := hostMounts(ds)[dir]; ok {
		t.Errorf("%s: mounts %s (%s)", what, dir, m)
	}
}

// probeTLS.podVolumes renders what deploy/ with the deploy/probe-tls
// component renders (object for object, as TestChartMatchesKustomize
// compares the defaults): the kubelet's pods directory, read-only with
// HostToContainer propagation, and --pod-volumes-dir naming it, in probed's
// DaemonSet and not in the shadow's, which runs spec probes only. Off (the
// default), neither; another kubeletPodsDir moves all three.
func TestChartProbeTLS(t *testing.T) {
	t.Parallel()
	const pods = "/var/lib/kubelet/pods"
	wrapped, objs := chartMatchesComponent(t, "probe-tls", "probeTLS.podVolumes=true")

	checkPodVolumes(t, "deploy/probe-tls", renderedDaemonSet(t, wrapped), pods)
	checkPodVolumes(t, "probeTLS.podVolumes", daemonSet(t, objs, "probed"), pods)
	const k0s = "/var/lib/k0s/kubelet/pods"
	moved := daemonSet(t, helmTemplate(t, "p", "probeTLS.podVolumes=true", "probeTLS.kubeletPodsDir="+k0s), "probed")
	checkPodVolumes(t, "probeTLS.kubeletPodsDir="+k0s, moved, k0s)
	if m, ok := hostMounts(moved)[pods]; ok {
		t.Errorf("probeTLS.kubeletPodsDir=%s: %s is still mounted (%s)", k0s, pods, m)
	}

	noPodVolumes(t, "the chart's defaults", renderedDaemonSet(t, helmTemplate(t, "p")), pods)
	noPodVolumes(t, "deploy/", renderedDaemonSet(t, kustomize(t, "../../deploy")), pods)
	noPodVolumes(t, "probeTLS.kubeletPodsDir alone", renderedDaemonSet(t, helmTemplate(t, "p", "probeTLS.kubeletPodsDir="+k0s)), k0s)
	withShadow := helmTemplate(t, "p", "probeTLS.podVolumes=true", "shadow.enabled=true")
	noPodVolumes(t, "the shadow with probeTLS.podVolumes", daemonSet(t, withShadow, "probed-shadow"), pods)
	checkPodVolumes(t, "probed beside the shadow", daemonSet(t, withShadow, "probed"), pods)
}

// podSource.mode=kubelet renders what deploy/ with deploy/pod-source-kubelet
// renders, object for object: the flags, the socket's directory mounted
// read-only, and a ClusterRole with no rule on pods. auto mounts the socket
// and keeps the read (its fallback needs it); the default (apiserver)
// neither, as deploy/ alone. container-status mode keeps get alone.
func TestChartPodSource(t *testing.T) {
	t.Parallel()
	const dir = "/var/lib/kubelet/pods-api"
	wrapped, objs := chartMatchesComponent(t, "pod-source-kubelet", "podSource.mode=kubelet")

	checkPodSource(t, "deploy/pod-source-kubelet", wrapped, "kubelet", dir, nil)
	checkPodSource(t, "podSource.mode=kubelet", objs, "kubelet", dir, nil)
	checkPodSource(t, "podSource.mode=auto", helmTemplate(t, "p", "podSource.mode=auto"), "auto", dir, []string{"get", "list", "watch"})
	checkPodSource(t, "the chart's defaults", helmTemplate(t, "p"), "", "", []string{"get", "list", "watch"})
	checkPodSource(t, "deploy/", kustomize(t, "../../deploy"), "", "", []string{"get", "list", "watch"})
	checkPodSource(t, "kubelet, container-status mode", helmTemplate(t, "p", "podSource.mode=kubelet", "flags.status-mode=container-status"), "kubelet", dir, []string{"get"})
	const k0s = "/var/lib/k0s/kubelet/pods-api"
	checkPodSource(t, "kubeletPodsAPIDir="+k0s, helmTemplate(t, "p", "podSource.mode=kubelet", "podSource.kubeletPodsAPIDir="+k0s), "kubelet", k0s, nil)
	shadow := helmTemplate(t, "p", "podSource.mode=kubelet", "shadow.enabled=true")
	if ds := daemonSet(t, shadow, "probed-shadow"); hostMounts(ds)[dir] == "" {
		t.Errorf("the shadow DaemonSet, which shares the ClusterRole, does not mount %s", dir)
	}
}

// checkPodSource checks the rendered DaemonSet's --pod-source and socket
// mount (none when source is ""), and the verbs the ClusterRole grants on
// pods.
func checkPodSource(t *testing.T, what string, objs []*unstructured.Unstructured, source, dir string, verbs []string) {
	t.Helper()
	var ds *appsv1.DaemonSet
	var role *unstructured.Unstructured
	for _, o := range objs {
		switch {
		case o.GetKind() == "DaemonSet" && !strings.HasSuffix(o.GetName(), "-shadow"):
			ds = new(appsv1.DaemonSet)
			if err := runtime.DefaultUnstructuredConverter.FromUnstructured(o.Object, ds); err != nil {
				t.Fatal(err)
			}
		case o.GetKind() == "ClusterRole" && (o.GetName() == "probed" || o.GetName() == "p-probed" || o.GetName() == "p"):
			role = o
		}
	}
	if ds == nil || role == nil {
		t.Fatalf("%s: no DaemonSet or ClusterRole rendered", what)
	}
	args := ds.Spec.Template.Spec.Containers[0].Args
	var got []string
	for _, a := range args {
		if strings.HasPrefix(a, "--pod-source") || strings.HasPrefix(a, "--kubelet-pods-api-socket") {
			got = append(got, a)
		}
	}
	var wantArgs []string
	if source != "" {
		wantArgs = []string{"--kubelet-pods-api-socket=" + dir + "/pods-api.sock", "--pod-source=" + source}
	}
	if !reflect.DeepEqual(got, wantArgs) {
		t.Errorf("%s: args %q, want %q", what, got, wantArgs)
	}
	mounted := hostMounts(ds)[dir]
	if source != "" && mounted != dir+" DirectoryOrCreate" {
		t.Errorf("%s: %s is mounted from %q, want the host's %s", what, dir, mounted, dir)
	}
	for _, m := range ds.Spec.Template.Spec.Containers[0].VolumeMounts {
		if m.MountPath == dir && !m.ReadOnly {
			t.Errorf("%s: the socket's directory is mounted read-write", what)
		}
	}
	var podVerbs []string
	rules, _, _ := unstructured.NestedSlice(role.Object, "rules")
	for _, r := range rules {
		rm := r.(map[string]any)
		res, _, _ := unstructured.NestedStringSlice(rm, "resources")
		if slices.Contains(res, "pods") {
			v, _, _ := unstructured.NestedStringSlice(rm, "verbs")
			podVerbs = append(podVerbs, v...)
		}
	}
	if !reflect.DeepEqual(podVerbs, verbs) {
		t.Errorf("%s: the ClusterRole grants %q on pods, want %q", what, podVerbs, verbs)
	}
}
