//go:build integration

package integration

import (
	"archive/tar"
	"compress/gzip"
	"context"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"

	"github.com/probed-dev/probed/test/harness/controlplane"
	"github.com/probed-dev/probed/test/harness/repo"
)

// The overrides every install path must honour everywhere.
const (
	overrideRegistry = "reg.example.com/team"
	overrideTag      = "0.1.0"
	overrideNS       = "shop-probed"
)

// renderedImages lists every container and init container image of objs.
func renderedImages(objs []*unstructured.Unstructured) map[string]string {
	out := map[string]string{}
	for _, o := range objs {
		for _, list := range []string{"containers", "initContainers"} {
			cs, _, _ := unstructured.NestedSlice(o.Object, "spec", "template", "spec", list)
			for _, c := range cs {
				m := c.(map[string]any)
				out[objKey(o)+" "+m["name"].(string)] = m["image"].(string)
			}
		}
	}
	return out
}

// checkOverrides checks what a render with the overrides must say: every
// image from the registry at the tag (probed's and the webhook's), every
// namespaced object and every reference in the namespace (nothing left
// naming probed-system), and with cert-manager, the certificate's names and
// both webhook configurations' CA injection following the namespace.
func checkOverrides(t *testing.T, what string, objs []*unstructured.Unstructured, certManager bool, prefix string) {
	t.Helper()
	imgs := renderedImages(objs)
	want := []string{overrideRegistry + "/probed:" + overrideTag, overrideRegistry + "/probed-webhook:" + overrideTag}
	var got []string
	for where, img := range imgs {
		if !slices.Contains(want, img) {
			t.Errorf("%s: %s runs %s, want one of %v", what, where, img, want)
		}
		got = append(got, img)
	}
	for _, w := range want {
		if !slices.Contains(got, w) {
			t.Errorf("%s: no container runs %s: %v", what, w, imgs)
		}
	}

	svc := prefix + "probed-webhook"
	var cert *unstructured.Unstructured
	injected := 0
	for _, o := range objs {
		b, _ := yaml.Marshal(o.Object)
		if strings.Contains(string(b), "probed-system") {
			t.Errorf("%s: %s still names probed-system:\n%s", what, objKey(o), b)
		}
		if o.GetNamespace() != "" && o.GetNamespace() != overrideNS {
			t.Errorf("%s: %s is not in %s", what, objKey(o), overrideNS)
		}
		switch o.GetKind() {
		case "Certificate":
			if o.GetName() == prefix+"probed-webhook-serving" {
				cert = o
			}
		case "MutatingWebhookConfiguration", "ValidatingWebhookConfiguration":
			ann := o.GetAnnotations()["cert-manager.io/inject-ca-from"]
			if certManager {
				if want := overrideNS + "/" + prefix + "probed-webhook-serving"; ann != want {
					t.Errorf("%s: %s injects the CA from %q, want %q", what, objKey(o), ann, want)
				}
				injected++
			} else if ann != "" {
				t.Errorf("%s: %s has inject-ca-from %q without cert-manager", what, objKey(o), ann)
			}
			whs, _, _ := unstructured.NestedSlice(o.Object, "webhooks")
			for _, wh := range whs {
				s, _, _ := unstructured.NestedMap(wh.(map[string]any), "clientConfig", "service")
				if s["namespace"] != overrideNS || s["name"] != svc {
					t.Errorf("%s: %s calls service %v/%v, want %s/%s", what, objKey(o), s["namespace"], s["name"], overrideNS, svc)
				}
			}
		}
	}
	if !certManager {
		if cert != nil {
			t.Errorf("%s: a Certificate without cert-manager", what)
		}
		return
	}
	if injected != 2 {
		t.Errorf("%s: %d webhook configurations with CA injection, want 2", what, injected)
	}
	if cert == nil {
		t.Fatalf("%s: no Certificate %sprobed-webhook-serving", what, prefix)
	}
	names, _, _ := unstructured.NestedStringSlice(cert.Object, "spec", "dnsNames")
	wantNames := []string{svc + "." + overrideNS + ".svc", svc + "." + overrideNS + ".svc.cluster.local"}
	if !slices.Equal(names, wantNames) {
		t.Errorf("%s: the serving certificate names %v, want %v", what, names, wantNames)
	}
	secret, _, _ := unstructured.NestedString(cert.Object, "spec", "secretName")
	mounted := false
	for _, o := range objs {
		if o.GetKind() != "Deployment" {
			continue
		}
		vols, _, _ := unstructured.NestedSlice(o.Object, "spec", "template", "spec", "volumes")
		for _, v := range vols {
			if n, _, _ := unstructured.NestedString(v.(map[string]any), "secret", "secretName"); n == secret {
				mounted = true
			}
		}
	}
	if !mounted {
		t.Errorf("%s: the webhook does not mount the certificate's Secret %s", what, secret)
	}
}

// The chart with one registry and tag, another namespace and cert-manager:
// both images, every name and the CA injection follow.
func TestChartOverrides(t *testing.T) {
	t.Parallel()
	base := []string{"image.repository=" + overrideRegistry + "/probed", "image.tag=" + overrideTag, "monitoring.enabled=true"}
	checkOverrides(t, "chart", helmTemplate(t, overrideNS, base...), false, "")
	checkOverrides(t, "chart with cert-manager", helmTemplate(t, overrideNS, append(base, "webhook.certManager.enabled=true")...), true, "")
	// namespace.name apart from the release namespace.
	checkOverrides(t, "chart with namespace.name", helmTemplate(t, "default", append(base, "namespace.name="+overrideNS,
		"namespace.create=true", "webhook.certManager.enabled=true")...), true, "")

	// webhook.image overrides what it sets, and only that.
	objs := helmTemplate(t, overrideNS, append(base, "webhook.image.repository=other.example.com/wh")...)
	imgs := renderedImages(objs)
	if imgs["Deployment/"+overrideNS+"/probed-webhook webhook"] != "other.example.com/wh:"+overrideTag ||
		imgs["DaemonSet/"+overrideNS+"/probed probed"] != overrideRegistry+"/probed:"+overrideTag {
		t.Errorf("webhook.image.repository: %v", imgs)
	}
	// Your own issuer: no self-signed chain, the Certificate names it.
	objs = helmTemplate(t, overrideNS, append(base, "webhook.certManager.enabled=true", "webhook.certManager.issuerRef.name=corp-ca",
		"webhook.certManager.issuerRef.kind=ClusterIssuer")...)
	for _, o := range objs {
		if o.GetKind() == "Issuer" {
			t.Errorf("an Issuer rendered with issuerRef set: %s", objKey(o))
		}
		if o.GetKind() == "Certificate" {
			if ref, _, _ := unstructured.NestedStringMap(o.Object, "spec", "issuerRef"); ref["name"] != "corp-ca" || ref["kind"] != "ClusterIssuer" {
				t.Errorf("issuerRef %v", ref)
			}
		}
	}
}

// docsWrapper is the kustomization docs/install.md tells users to write
// around deploy/ ("my-probed/kustomization.yaml").
func docsWrapper(t *testing.T) string {
	t.Helper()
	w, err := repo.InstallWrapper("../..")
	if err != nil {
		t.Fatal(err)
	}
	return w
}

// The kustomize wrapper docs/install.md shows, as written but for the
// registry, tag and namespace, around deploy/ (and overlays/crio), with and
// without cert-manager and a namePrefix: both images, every name and the CA
// injection follow.
func TestKustomizeWrapperOverrides(t *testing.T) {
	t.Parallel()
	doc := docsWrapper(t)
	for _, want := range []string{"- ../probed/deploy", "namespace: probed-system", "newName: registry.example.com/team/probed\n", "newTag: 0.2.0", "replacements:"} {
		if !strings.Contains(doc, want) {
			t.Fatalf("docs/install.md's wrapper lacks %q:\n%s", want, doc)
		}
	}
	// One setting: the webhook's image is not named in the wrapper.
	if n := strings.Count(doc, "newName:"); n != 1 || strings.Contains(doc, "name: probed-webhook\n  newName") {
		t.Fatalf("docs/install.md's wrapper sets %d images; want probed's alone:\n%s", n, doc)
	}
	original := doc
	doc = strings.ReplaceAll(doc, "registry.example.com/team/", overrideRegistry+"/")
	doc = strings.ReplaceAll(doc, "newTag: 0.2.0", "newTag: "+overrideTag)
	doc = strings.Replace(doc, "namespace: probed-system", "namespace: "+overrideNS, 1)

	// my-probed beside probed (this checkout), as the docs lay them out.
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	if err := os.Symlink(root, filepath.Join(dir, "probed")); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name, extra string
		certManager bool
		prefix      string
	}{
		{"deploy/", "", false, ""},
		{"deploy/ with cert-manager", "components:\n- ../probed/deploy/webhook/cert-manager\n", true, ""},
		{"deploy/ with cert-manager and a namePrefix", "namePrefix: acme-\ncomponents:\n- ../probed/deploy/webhook/cert-manager\n", true, "acme-"},
		{"overlays/crio with cert-manager", "components:\n- ../probed/deploy/webhook/cert-manager\n", true, ""},
		{"deploy/ with its shadow", "components:\n- ../probed/deploy/shadow\n", false, ""},
		{"deploy/ with probe-tls", "components:\n- ../probed/deploy/probe-tls\n", false, ""},
	} {
		k := doc + c.extra
		if strings.HasPrefix(c.name, "overlays/crio") {
			k = strings.Replace(k, "- ../probed/deploy ", "- ../probed/overlays/crio ", 1)
		}
		my := filepath.Join(dir, "my-probed")
		if err := os.MkdirAll(my, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(my, "kustomization.yaml"), []byte(k), 0o644); err != nil {
			t.Fatal(err)
		}
		checkOverrides(t, c.name, kustomize(t, my), c.certManager, c.prefix)
	}

	// The webhook's image follows any registry path, a port included; what
	// it cannot follow stops the build, and so does a tag left at deploy/'s
	// dev, which no registry serves.
	for _, c := range []struct{ name, images, want, fails string }{
		{"a registry with a port", "- name: probed\n  newName: localhost:5000/a/b/probed\n  newTag: v2.0.0-rc.1\n",
			"localhost:5000/a/b/probed-webhook:v2.0.0-rc.1", ""},
		{"a registry only: the tag stays dev", "- name: probed\n  newName: mirror.example.com/probed\n", "",
			"the image tag is still dev, which no registry serves"},
		{"the tag dev", "- name: probed\n  newName: mirror.example.com/probed\n  newTag: dev\n", "",
			"the image tag is still dev, which no registry serves"},
		{"a repository not ending in probed", "- name: probed\n  newName: registry.example.com/probed-daemon\n  newTag: 0.1.0\n",
			"", "options.index 1 is out of bounds"},
		{"a digest", "- name: probed\n  newName: registry.example.com/probed\n  digest: sha256:" + strings.Repeat("ab", 32) + "\n",
			"", "options.index 1 is out of bounds"},
	} {
		k := regexp.MustCompile(`(?s)images:\n.*?\n(#|replacements:)`).ReplaceAllString(original, "images:\n"+strings.ReplaceAll(c.images, "$", "$$")+"$1")
		if !strings.Contains(k, c.images) || !strings.Contains(k, "replacements:") {
			t.Fatalf("%s: the wrapper's images entry was not replaced:\n%s", c.name, k)
		}
		my := filepath.Join(dir, "my-probed")
		if err := os.WriteFile(filepath.Join(my, "kustomization.yaml"), []byte(k), 0o644); err != nil {
			t.Fatal(err)
		}
		out, err := exec.Command(kubectlPath(t), "kustomize", my).CombinedOutput()
		if c.fails != "" {
			if err == nil || !strings.Contains(string(out), c.fails) {
				t.Errorf("%s: kubectl kustomize: %v, %s; want it to fail with %q", c.name, err, out, c.fails)
			}
			continue
		}
		if err != nil {
			t.Fatalf("%s: kubectl kustomize: %v\n%s", c.name, err, out)
		}
		objs, err := decodeObjects(out)
		if err != nil {
			t.Fatal(err)
		}
		imgs := renderedImages(objs)
		if got := imgs["Deployment/probed-system/probed-webhook webhook"]; got != c.want {
			t.Errorf("%s: the webhook runs %q, want %q (%v)", c.name, got, c.want, imgs)
		}
	}
}

// Every kustomization in the tree renders with kubectl kustomize (the
// components through a kustomization that includes them): deploy/, its
// monitoring, the overlays, and the test data.
func TestEveryKustomizationRenders(t *testing.T) {
	t.Parallel()
	var dirs []string
	for _, top := range []string{"../../deploy", "../../overlays", "testdata"} {
		err := filepath.WalkDir(top, func(p string, d os.DirEntry, err error) error {
			if err == nil && !d.IsDir() && d.Name() == "kustomization.yaml" {
				dirs = append(dirs, filepath.Dir(p))
			}
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	if len(dirs) < 6 {
		t.Fatalf("found only %v", dirs)
	}
	for _, d := range dirs {
		b, err := os.ReadFile(filepath.Join(d, "kustomization.yaml"))
		if err != nil {
			t.Fatal(err)
		}
		if strings.Contains(string(b), "kind: Component") {
			continue // rendered through deploy/ or TestKustomizeWrapperOverrides
		}
		if objs := kustomize(t, d); len(objs) == 0 {
			t.Errorf("kubectl kustomize %s: nothing rendered", d)
		}
	}
}

// The chart has no symbolic links, and `helm package` of a copy of it
// (charts/probed alone, as a chart repository or a vendoring tool has it)
// renders the monitoring objects with the alerts and the dashboard.
func TestChartPackagesAlone(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	copyDir := filepath.Join(dir, "probed")
	if out, err := exec.Command("cp", "-r", chartDir, copyDir).CombinedOutput(); err != nil {
		t.Fatalf("cp: %v\n%s", err, out)
	}
	err := filepath.WalkDir(copyDir, func(p string, d os.DirEntry, err error) error {
		if err == nil && d.Type()&os.ModeSymlink != 0 {
			t.Errorf("%s is a symbolic link", strings.TrimPrefix(p, dir))
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(helmPath(t), "package", copyDir, "--destination", dir).CombinedOutput()
	if err != nil {
		t.Fatalf("helm package of a copy of the chart: %v\n%s", err, out)
	}
	archives, _ := filepath.Glob(filepath.Join(dir, "probed-*.tgz"))
	if len(archives) != 1 {
		t.Fatalf("archives %v", archives)
	}
	f, err := os.Open(archives[0])
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	zr, err := gzip.NewReader(f)
	if err != nil {
		t.Fatal(err)
	}
	tr := tar.NewReader(zr)
	var files []string
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		} else if err != nil {
			t.Fatal(err)
		}
		files = append(files, h.Name)
	}
	for _, want := range []string{"probed/files/prometheusrule.yaml", "probed/files/grafana-dashboard.json", "probed/values.schema.json"} {
		if !slices.Contains(files, want) {
			t.Errorf("the archive lacks %s: %v", want, files)
		}
	}
	out, err = exec.Command(helmPath(t), "template", "probed", archives[0], "--namespace", "x", "--set", "image.tag=dev", "--set", "monitoring.enabled=true").Output()
	if err != nil {
		t.Fatalf("helm template of the archive: %v", err)
	}
	objs, err := decodeObjects(out)
	if err != nil {
		t.Fatal(err)
	}
	var alerts int
	var dashboard bool
	for _, o := range objs {
		switch o.GetKind() {
		case "PrometheusRule":
			groups, _, _ := unstructured.NestedSlice(o.Object, "spec", "groups")
			for _, g := range groups {
				rules, _, _ := unstructured.NestedSlice(g.(map[string]any), "rules")
				alerts += len(rules)
			}
		case "ConfigMap":
			s, _, _ := unstructured.NestedString(o.Object, "data", "grafana-dashboard.json")
			dashboard = dashboard || strings.Contains(s, `"probed-overview"`)
		}
	}
	if alerts < 5 || !dashboard {
		t.Errorf("the packaged chart renders %d rules and dashboard %v", alerts, dashboard)
	}
}

// helm install into a namespace without the Pod Security label probed
// needs, or one helm's --create-namespace would create without it, is
// refused with what to run; into a labelled one it installs. Against the
// real API server (the chart's lookup needs a cluster).
func TestChartRefusesUnlabelledNamespace(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	kubeconfig := filepath.Join(t.TempDir(), "kubeconfig")
	if err := controlplane.WriteKubeconfig(kubeconfig, cp.RESTConfig()); err != nil {
		t.Fatal(err)
	}
	helm := func(args ...string) (string, error) {
		cmd := exec.Command(helmPath(t), append(args, "--kubeconfig", kubeconfig)...)
		cmd.Env = append(os.Environ(), "HELM_CACHE_HOME="+t.TempDir(), "HELM_CONFIG_HOME="+t.TempDir(), "HELM_DATA_HOME="+t.TempDir())
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	// --create-namespace: helm makes the namespace after rendering; the
	// chart sees none and refuses.
	// Names of their own: other tests' objects are in this API server too.
	vals := []string{"--set", "webhook.enabled=false", "--set", "fullnameOverride=psa-probed", "--set", "image.tag=dev"}
	out, err := helm(append([]string{"install", "psa-new", chartDir, "--namespace", "psa-new", "--create-namespace"}, vals...)...)
	if err == nil || !strings.Contains(out, "pod-security.kubernetes.io/enforce=privileged") || !strings.Contains(out, "kubectl label namespace psa-new") {
		t.Errorf("helm install --create-namespace: err %v, want a refusal naming the label:\n%s", err, out)
	}
	if _, err := client.AppsV1().DaemonSets("psa-new").Get(ctx, "probed", metav1.GetOptions{}); err == nil {
		t.Error("a DaemonSet was installed into the unlabelled namespace")
	}

	if err := cp.EnsureNamespace(ctx, "psa-unlabelled"); err != nil {
		t.Fatal(err)
	}
	out, err = helm(append([]string{"install", "psa-unlabelled", chartDir, "--namespace", "psa-unlabelled", "--dry-run=server"}, vals...)...)
	if err == nil || !strings.Contains(out, "kubectl label --overwrite namespace psa-unlabelled") {
		t.Errorf("helm install into an unlabelled namespace: err %v, want a refusal:\n%s", err, out)
	}
	ns, err := client.CoreV1().Namespaces().Get(ctx, "psa-unlabelled", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	ns.Labels["pod-security.kubernetes.io/enforce"] = "privileged"
	if _, err := client.CoreV1().Namespaces().Update(ctx, ns, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if out, err := helm(append([]string{"install", "psa-unlabelled", chartDir, "--namespace", "psa-unlabelled", "--dry-run=server"}, vals...)...); err != nil {
		t.Errorf("helm install into the labelled namespace: %v\n%s", err, out)
	}
}

// monitoring.runbookBaseURL moves every alert's runbook link and keeps its
// anchor; left empty, the links are deploy/monitoring's, the release's
// docs (TestChartMatchesKustomize compares the whole PrometheusRule). A
// base with a fragment is refused by the schema.
func TestChartRunbookBaseURL(t *testing.T) {
	t.Parallel()
	const wiki = "https://wiki.example.org/probed/observability.md"
	n := 0
	for _, o := range helmTemplate(t, "probed-system", "monitoring.enabled=true", "monitoring.runbookBaseURL="+wiki) {
		if o.GetKind() != "PrometheusRule" {
			continue
		}
		groups, _, _ := unstructured.NestedSlice(o.Object, "spec", "groups")
		for _, g := range groups {
			rules, _, _ := unstructured.NestedSlice(g.(map[string]any), "rules")
			for _, r := range rules {
				alert, _, _ := unstructured.NestedString(r.(map[string]any), "alert")
				if alert == "" {
					continue
				}
				n++
				url, _, _ := unstructured.NestedString(r.(map[string]any), "annotations", "runbook_url")
				if want := wiki + "#" + strings.ToLower(alert); url != want {
					t.Errorf("%s: runbook_url %q, want %q", alert, url, want)
				}
			}
		}
	}
	if n < 5 {
		t.Errorf("%d alerts rendered, want every one", n)
	}
	out, err := exec.Command(helmPath(t), "template", "probed", chartDir, "--set", "image.tag=dev",
		"--set", "monitoring.enabled=true", "--set", "monitoring.runbookBaseURL="+wiki+"#x").CombinedOutput()
	if err == nil || !strings.Contains(string(out), "runbookBaseURL") {
		t.Errorf("a base with a fragment rendered (%v):\n%s", err, out)
	}
}
