package node

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/probed-dev/probed/test/harness/repo"
)

// deployDaemonSet reads deploy/'s DaemonSet as DeployProbed does.
func deployDaemonSet(t *testing.T, root string) *unstructured.Unstructured {
	t.Helper()
	objs, err := loadManifests(filepath.Join(root, "deploy"))
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range objs {
		if o.GetKind() == "DaemonSet" {
			return o
		}
	}
	t.Fatal("deploy/ has no DaemonSet")
	return nil
}

// deploy/probe-tls applies to deploy/'s DaemonSet as kustomize applies it
// (TestChartProbeTLS, integration, compares kustomize's with the chart's),
// and the node's pods directory replaces /var/lib/kubelet/pods in all three
// places. A component with resources, or a patch of anything else, is
// refused rather than half applied.
func TestApplyComponent(t *testing.T) {
	root, err := repo.Root()
	if err != nil {
		t.Fatal(err)
	}
	u := deployDaemonSet(t, root)
	if err := applyComponent(filepath.Join(root, "deploy", "probe-tls"), u); err != nil {
		t.Fatal(err)
	}
	ds := &appsv1.DaemonSet{}
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, ds); err != nil {
		t.Fatal(err)
	}
	spec := &ds.Spec.Template.Spec
	c := &spec.Containers[0]
	const dir = "/tmp/run/kubelet/root/pods"
	movePodsDir(spec, c, dir)
	if !slices.Contains(c.Args, "--pod-volumes-dir="+dir) || slices.Contains(c.Args, "--pod-volumes-dir="+defaultKubeletPodsDir) {
		t.Errorf("args %q: want --pod-volumes-dir=%s", c.Args, dir)
	}
	var vol string
	for _, v := range spec.Volumes {
		if v.HostPath != nil && v.HostPath.Path == dir {
			vol = v.Name
		}
	}
	i := slices.IndexFunc(c.VolumeMounts, func(m corev1.VolumeMount) bool { return m.Name == vol })
	if vol == "" || i < 0 {
		t.Fatalf("no mount of the host's %s: volumes %+v, mounts %+v", dir, spec.Volumes, c.VolumeMounts)
	}
	if m := c.VolumeMounts[i]; m.MountPath != dir || !m.ReadOnly || m.MountPropagation == nil || *m.MountPropagation != corev1.MountPropagationHostToContainer {
		t.Errorf("mount %+v: want %s, read-only, HostToContainer", m, dir)
	}

	if err := applyComponent(filepath.Join(root, "deploy", "pdb-restarts"), deployDaemonSet(t, root)); err == nil || !strings.Contains(err.Error(), "resources") {
		t.Errorf("pdb-restarts, which has resources: %v, want refused", err)
	}
	other := t.TempDir()
	b, err := os.ReadFile(filepath.Join(root, "deploy", "probe-tls", "kustomization.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	k := strings.Replace(string(b), "name: probed\n", "name: probed-shadow\n", 1)
	if err := os.WriteFile(filepath.Join(other, "kustomization.yaml"), []byte(k), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := applyComponent(other, deployDaemonSet(t, root)); err == nil || !strings.Contains(err.Error(), "not an inline patch of DaemonSet probed") {
		t.Errorf("a patch of probed-shadow: %v, want refused", err)
	}
}
