package node

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/probed-dev/probed/test/harness/repo"
)

// deployObjects reads deploy/'s objects as DeployProbed does.
func deployObjects(t *testing.T, root string) []*unstructured.Unstructured {
	t.Helper()
	objs, err := loadManifests(filepath.Join(root, "deploy"))
	if err != nil {
		t.Fatal(err)
	}
	return objs
}

// typed converts the one object of objs of kind and name into out.
func typed(t *testing.T, objs []*unstructured.Unstructured, kind, name string, out any) {
	t.Helper()
	for _, o := range objs {
		if o.GetKind() == kind && o.GetName() == name {
			if err := runtime.DefaultUnstructuredConverter.FromUnstructured(o.Object, out); err != nil {
				t.Fatal(err)
			}
			return
		}
	}
	t.Fatalf("deploy/ has no %s %s", kind, name)
}

// writeComponent writes a kustomization.yaml of text into a new directory.
func writeComponent(t *testing.T, text string) string {
	t.Helper()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "kustomization.yaml"), []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	return dir
}

// hostMount returns the volume of spec with hostPath path and c's mount of it.
func hostMount(t *testing.T, spec *corev1.PodSpec, c *corev1.Container, path string) (corev1.Volume, corev1.VolumeMount) {
	t.Helper()
	i := slices.IndexFunc(spec.Volumes, func(v corev1.Volume) bool { return v.HostPath != nil && v.HostPath.Path == path })
	if i < 0 {
		t.Fatalf("no hostPath volume of %s: %+v", path, spec.Volumes)
	}
	v := spec.Volumes[i]
	j := slices.IndexFunc(c.VolumeMounts, func(m corev1.VolumeMount) bool { return m.Name == v.Name })
	if j < 0 {
		t.Fatalf("no mount of volume %s (%s): %+v", v.Name, path, c.VolumeMounts)
	}
	return v, c.VolumeMounts[j]
}

const testRoot = "/tmp/run/kubelet/root"

// deploy/probe-tls applies to deploy/'s DaemonSet as kustomize applies it
// (TestChartProbeTLS, integration, compares kustomize's with the chart's),
// and the node's pods directory replaces /var/lib/kubelet/pods in all three
// places. A component with resources, or a patch of anything deploy/ does
// not hold, is refused rather than half applied.
func TestApplyComponent(t *testing.T) {
	root, err := repo.Root()
	if err != nil {
		t.Fatal(err)
	}
	objs := deployObjects(t, root)
	if err := applyComponent(filepath.Join(root, "deploy", "probe-tls"), objs); err != nil {
		t.Fatal(err)
	}
	ds := &appsv1.DaemonSet{}
	typed(t, objs, "DaemonSet", "probed", ds)
	spec := &ds.Spec.Template.Spec
	c := &spec.Containers[0]
	moveKubeletRoot(spec, c, testRoot)
	dir := testRoot + "/pods"
	if !slices.Contains(c.Args, "--pod-volumes-dir="+dir) || slices.Contains(c.Args, "--pod-volumes-dir="+defaultKubeletPodsDir) {
		t.Errorf("args %q: want --pod-volumes-dir=%s", c.Args, dir)
	}
	if slices.ContainsFunc(c.Args, func(a string) bool { return strings.HasPrefix(a, "--kubelet-pods-api-socket") }) {
		t.Errorf("args %q: --kubelet-pods-api-socket without the pods-api directory mounted", c.Args)
	}
	_, m := hostMount(t, spec, c, dir)
	if m.MountPath != dir || !m.ReadOnly || m.MountPropagation == nil || *m.MountPropagation != corev1.MountPropagationHostToContainer {
		t.Errorf("mount %+v: want %s, read-only, HostToContainer", m, dir)
	}

	if err := applyComponent(filepath.Join(root, "deploy", "pdb-restarts"), deployObjects(t, root)); err == nil || !strings.Contains(err.Error(), "resources") {
		t.Errorf("pdb-restarts, which has resources: %v, want refused", err)
	}
	b, err := os.ReadFile(filepath.Join(root, "deploy", "probe-tls", "kustomization.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	other := writeComponent(t, strings.Replace(string(b), "name: probed\n", "name: probed-shadow\n", 1))
	if err := applyComponent(other, deployObjects(t, root)); err == nil || !strings.Contains(err.Error(), "0 of deploy/'s objects match") {
		t.Errorf("a patch of probed-shadow: %v, want refused", err)
	}
}

// A component's patch of probed's ClusterRole applies to it, targeted as
// kustomize targets it (group and version may be left out), its "test"
// operations guarding it; one the harness cannot apply (a patch file, a
// selector, a kind deploy/ does not hold) is refused.
func TestApplyComponentClusterRole(t *testing.T) {
	root, err := repo.Root()
	if err != nil {
		t.Fatal(err)
	}
	const removePods = `apiVersion: kustomize.config.k8s.io/v1alpha1
kind: Component
patches:
- target:
    kind: ClusterRole
    name: probed
  patch: |-
    - op: test
      path: /rules/0/resources
      value: ["pods"]
    - op: remove
      path: /rules/0
`
	objs := deployObjects(t, root)
	var before rbacv1.ClusterRole
	typed(t, objs, "ClusterRole", "probed", &before)
	dir := writeComponent(t, removePods)
	if err := applyComponent(dir, objs); err != nil {
		t.Fatal(err)
	}
	var after rbacv1.ClusterRole
	typed(t, objs, "ClusterRole", "probed", &after)
	if len(after.Rules) != len(before.Rules)-1 || slices.ContainsFunc(after.Rules, func(r rbacv1.PolicyRule) bool {
		return slices.Contains(r.Resources, "pods")
	}) {
		t.Errorf("rules after the patch %+v: want deploy/'s without its pods rule", after.Rules)
	}
	// Again: /rules/0 is no longer pods, and the test operation says so.
	if err := applyComponent(dir, objs); err == nil || !strings.Contains(err.Error(), "patch 0 of ClusterRole probed") {
		t.Errorf("the same patch once more: %v, want its test operation to fail", err)
	}

	for name, text := range map[string]string{
		"a patch file": `apiVersion: kustomize.config.k8s.io/v1alpha1
kind: Component
patches:
- target: {kind: ClusterRole, name: probed}
  path: patch.yaml
`,
		"a label selector": `apiVersion: kustomize.config.k8s.io/v1alpha1
kind: Component
patches:
- target: {kind: ClusterRole, labelSelector: app.kubernetes.io/name=probed}
  patch: '[{"op": "remove", "path": "/rules/0"}]'
`,
		"a kind deploy/ does not hold": `apiVersion: kustomize.config.k8s.io/v1alpha1
kind: Component
patches:
- target: {kind: Role, name: probed}
  patch: '[{"op": "remove", "path": "/rules/0"}]'
`,
		"the wrong group": `apiVersion: kustomize.config.k8s.io/v1alpha1
kind: Component
patches:
- target: {group: apps, kind: ClusterRole, name: probed}
  patch: '[{"op": "remove", "path": "/rules/0"}]'
`,
	} {
		if err := applyComponent(writeComponent(t, text), deployObjects(t, root)); err == nil {
			t.Errorf("%s: applied, want refused", name)
		}
	}
}

// deploy/pod-source-kubelet applies to deploy/'s DaemonSet and ClusterRole:
// --pod-source=kubelet, the node's pods-api directory mounted read-only at
// its own path and --kubelet-pods-api-socket naming the socket in it, and
// no rule of the ClusterRole left on pods, while pods/status and nodes stay.
func TestPodSourceKubeletComponent(t *testing.T) {
	root, err := repo.Root()
	if err != nil {
		t.Fatal(err)
	}
	objs := deployObjects(t, root)
	if err := applyComponent(filepath.Join(root, "deploy", "pod-source-kubelet"), objs); err != nil {
		t.Fatal(err)
	}
	ds := &appsv1.DaemonSet{}
	typed(t, objs, "DaemonSet", "probed", ds)
	spec := &ds.Spec.Template.Spec
	c := &spec.Containers[0]
	moveKubeletRoot(spec, c, testRoot)
	dir := testRoot + "/pods-api"
	for _, want := range []string{"--pod-source=kubelet", "--kubelet-pods-api-socket=" + dir + "/pods-api.sock"} {
		if !slices.Contains(c.Args, want) {
			t.Errorf("args %q: want %s", c.Args, want)
		}
	}
	if slices.ContainsFunc(c.Args, func(a string) bool { return strings.Contains(a, defaultKubeletRoot) }) {
		t.Errorf("args %q still name %s", c.Args, defaultKubeletRoot)
	}
	v, m := hostMount(t, spec, c, dir)
	if v.HostPath.Type == nil || *v.HostPath.Type != corev1.HostPathDirectoryOrCreate || m.MountPath != dir || !m.ReadOnly {
		t.Errorf("volume %+v mounted %+v: want %s, DirectoryOrCreate, read-only at the same path", v, m, dir)
	}

	var cr rbacv1.ClusterRole
	typed(t, objs, "ClusterRole", "probed", &cr)
	allowed := func(resource, verb string) bool {
		return slices.ContainsFunc(cr.Rules, func(r rbacv1.PolicyRule) bool {
			return slices.Contains(r.APIGroups, "") && slices.Contains(r.Resources, resource) && slices.Contains(r.Verbs, verb)
		})
	}
	for _, verb := range []string{"get", "list", "watch"} {
		if allowed("pods", verb) {
			t.Errorf("the ClusterRole still grants %s on pods: %+v", verb, cr.Rules)
		}
	}
	if !allowed("pods/status", "patch") || !allowed("nodes", "get") {
		t.Errorf("the ClusterRole lost pods/status or nodes: %+v", cr.Rules)
	}

	// Without the socket's directory mounted, no socket flag is added.
	objs = deployObjects(t, root)
	typed(t, objs, "DaemonSet", "probed", ds)
	c = &ds.Spec.Template.Spec.Containers[0]
	moveKubeletRoot(&ds.Spec.Template.Spec, c, testRoot)
	if slices.ContainsFunc(c.Args, func(a string) bool { return strings.HasPrefix(a, "--kubelet-pods-api-socket") }) {
		t.Errorf("args %q: a socket flag without the pods-api directory mounted", c.Args)
	}
}
