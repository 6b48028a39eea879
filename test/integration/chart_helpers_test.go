//go:build integration

package integration

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/restmapper"
	"sigs.k8s.io/yaml"

	"github.com/probed-dev/probed/test/harness/manifest"
)

const chartDir = "../../charts/probed"

// helmLabels are the labels the chart adds to every object's metadata and
// deploy/ does not have; the comparison with deploy/ ignores exactly these.
var helmLabels = []string{"helm.sh/chart", "app.kubernetes.io/managed-by", "app.kubernetes.io/instance", "app.kubernetes.io/version"}

// helmPath builds helm if needed (hack/helm.sh; a no-op once built) and
// returns it.
func helmPath(t *testing.T) string {
	t.Helper()
	var stderr bytes.Buffer
	cmd := exec.Command("bash", "../../hack/helm.sh")
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("hack/helm.sh: %v\n%s", err, stderr.String())
	}
	return filepath.Join(strings.TrimSpace(string(out)), "helm")
}

// helmTemplate renders the chart as release "probed" in namespace ns, with
// --set arguments sets after image.tag=dev: deploy/'s image, which the
// chart renders only when asked to (a tag left to the chart's appVersion,
// dev, fails).
func helmTemplate(t *testing.T, ns string, sets ...string) []*unstructured.Unstructured {
	t.Helper()
	return helmTemplateRelease(t, "probed", ns, append([]string{"image.tag=dev"}, sets...)...)
}

// helmTemplateRelease renders the chart as release in namespace ns, with
// --set arguments sets and nothing else.
func helmTemplateRelease(t *testing.T, release, ns string, sets ...string) []*unstructured.Unstructured {
	t.Helper()
	args := []string{"template", release, chartDir, "--namespace", ns}
	for _, s := range sets {
		args = append(args, "--set", s)
	}
	// stderr apart: helm warns there that files/ holds symbolic links.
	var stderr bytes.Buffer
	cmd := exec.Command(helmPath(t), args...)
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("helm %s: %v\n%s", strings.Join(args, " "), err, stderr.String())
	}
	objs, err := decodeObjects(out)
	if err != nil {
		t.Fatalf("helm template output: %v", err)
	}
	return objs
}

// kustomize renders dir with kubectl kustomize.
func kustomize(t *testing.T, dir string) []*unstructured.Unstructured {
	t.Helper()
	out, err := exec.Command(kubectlPath(t), "kustomize", dir).Output()
	if err != nil {
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			t.Fatalf("kubectl kustomize %s: %v\n%s", dir, err, ee.Stderr)
		}
		t.Fatalf("kubectl kustomize %s: %v", dir, err)
	}
	objs, err := decodeObjects(out)
	if err != nil {
		t.Fatalf("kubectl kustomize %s: %v", dir, err)
	}
	return objs
}

// decodeObjects decodes a multi-document YAML stream, skipping empty
// documents (Helm's comment-only ones).
func decodeObjects(b []byte) ([]*unstructured.Unstructured, error) {
	return manifest.Unstructured(b)
}

// objKey names an object: Kind/namespace/name.
func objKey(u *unstructured.Unstructured) string {
	return u.GetKind() + "/" + u.GetNamespace() + "/" + u.GetName()
}

// byKey indexes objs by objKey; a name twice is an error.
func byKey(t *testing.T, objs []*unstructured.Unstructured, source string) map[string]*unstructured.Unstructured {
	t.Helper()
	m := map[string]*unstructured.Unstructured{}
	for _, o := range objs {
		if _, dup := m[objKey(o)]; dup {
			t.Errorf("%s renders %s twice", source, objKey(o))
		}
		m[objKey(o)] = o
	}
	return m
}

// withoutHelmLabels returns a copy of u without helmLabels in its metadata.
func withoutHelmLabels(u *unstructured.Unstructured) *unstructured.Unstructured {
	c := u.DeepCopy()
	l := c.GetLabels()
	for _, k := range helmLabels {
		delete(l, k)
	}
	c.SetLabels(l)
	return c
}

// collapseSpaces returns a copy of an object's content with every string's
// runs of white space made one space. Folded YAML scalars with more-indented
// lines (the CEL in deploy/) come out of kustomize's YAML library with one
// more newline than out of Helm's; to CEL and to every other field here white
// space is white space.
func collapseSpaces(v any) any {
	switch x := v.(type) {
	case string:
		return strings.Join(strings.Fields(x), " ")
	case []any:
		out := make([]any, len(x))
		for i := range x {
			out[i] = collapseSpaces(x[i])
		}
		return out
	case map[string]any:
		out := make(map[string]any, len(x))
		for k, e := range x {
			out[k] = collapseSpaces(e)
		}
		return out
	}
	return v
}

// sortedKeys returns m's keys, sorted.
func sortedKeys[V any](m map[string]V) []string {
	ks := make([]string, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	slices.Sort(ks)
	return ks
}

func toYAML(u *unstructured.Unstructured) string {
	b, err := yaml.Marshal(u.Object)
	if err != nil {
		return err.Error()
	}
	return string(b)
}

// lineDiff shows the lines only in a (-) and only in b (+), in order: enough
// to spot a difference between two renderings of one object.
func lineDiff(a, b string) string {
	al, bl := strings.Split(a, "\n"), strings.Split(b, "\n")
	// Longest common subsequence, then walk it.
	n, m := len(al), len(bl)
	lcs := make([][]int, n+1)
	for i := range lcs {
		lcs[i] = make([]int, m+1)
	}
	for i := n - 1; i >= 0; i-- {
		for j := m - 1; j >= 0; j-- {
			if al[i] == bl[j] {
				lcs[i][j] = lcs[i+1][j+1] + 1
			} else {
				lcs[i][j] = max(lcs[i+1][j], lcs[i][j+1])
			}
		}
	}
	var sb strings.Builder
	i, j := 0, 0
	for i < n || j < m {
		switch {
		case i < n && j < m && al[i] == bl[j]:
			i, j = i+1, j+1
		case j < m && (i == n || lcs[i][j+1] >= lcs[i+1][j]):
			fmt.Fprintf(&sb, "+ %s\n", bl[j])
			j++
		default:
			fmt.Fprintf(&sb, "- %s\n", al[i])
			i++
		}
	}
	return sb.String()
}

// dryRunApply server-side-applies objs with dryRun=All: the API server
// defaults, validates and admits each as it would store it, and stores
// nothing. Namespaces the objects name must exist.
func dryRunApply(ctx context.Context, objs []*unstructured.Unstructured) error {
	mapper, dyn, err := restClients()
	if err != nil {
		return err
	}
	var errs []error
	for _, o := range objs {
		gvk := o.GroupVersionKind()
		m, err := mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", objKey(o), err))
			continue
		}
		var r dynamic.ResourceInterface = dyn.Resource(m.Resource)
		if m.Scope.Name() == "namespace" {
			if o.GetNamespace() == "" {
				errs = append(errs, fmt.Errorf("%s: namespaced, but has no namespace", objKey(o)))
				continue
			}
			r = dyn.Resource(m.Resource).Namespace(o.GetNamespace())
		} else if o.GetNamespace() != "" {
			errs = append(errs, fmt.Errorf("%s: cluster-scoped, but names a namespace", objKey(o)))
			continue
		}
		_, err = r.Apply(ctx, o.GetName(), o, metav1.ApplyOptions{
			FieldManager: "probed-chart-test", Force: true, DryRun: []string{metav1.DryRunAll}})
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", objKey(o), err))
		}
	}
	return errors.Join(errs...)
}

// restClients maps kinds to resources from fresh discovery (CRDs included).
func restClients() (*restmapper.DeferredDiscoveryRESTMapper, *dynamic.DynamicClient, error) {
	dc, err := discovery.NewDiscoveryClientForConfig(cp.RESTConfig())
	if err != nil {
		return nil, nil, err
	}
	dyn, err := dynamic.NewForConfig(cp.RESTConfig())
	if err != nil {
		return nil, nil, err
	}
	// A new cache per call: CRDs created since are seen.
	return restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(dc)), dyn, nil
}
