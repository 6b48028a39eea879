//go:build integration

package integration

import (
	"slices"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
)

// checkPodNetns checks that ds may send probes from inside pods, and no
// more: --pod-network-probes=true, SYS_ADMIN beside KILL, and
// /var/run/netns from the host, read-only with HostToContainer
// propagation; or, with on false, none of these.
func checkPodNetns(t *testing.T, what string, ds *appsv1.DaemonSet, on bool) {
	t.Helper()
	c := ds.Spec.Template.Spec.Containers[0]
	const dir = "/var/run/netns"
	if got := slices.Contains(c.Args, "--pod-network-probes=true"); got != on {
		t.Errorf("%s: args %q: --pod-network-probes=true %v, want %v", what, c.Args, got, on)
	}
	var caps []corev1.Capability
	if sc := c.SecurityContext; sc != nil && sc.Capabilities != nil {
		caps = sc.Capabilities.Add
	}
	want := []corev1.Capability{"KILL"}
	if on {
		want = append(want, "SYS_ADMIN")
	}
	if !slices.Equal(caps, want) {
		t.Errorf("%s: capabilities add %v, want %v", what, caps, want)
	}
	got, mounted := hostMounts(ds)[dir]
	if mounted != on || (on && got != dir+" DirectoryOrCreate") {
		t.Errorf("%s: %s mounted %v from %q, want %v", what, dir, mounted, got, on)
	}
	for _, m := range c.VolumeMounts {
		if m.MountPath == dir && (!m.ReadOnly || m.MountPropagation == nil || *m.MountPropagation != corev1.MountPropagationHostToContainer) {
			t.Errorf("%s: mount of %s: readOnly %v, propagation %v; want read-only, HostToContainer", what, dir, m.ReadOnly, m.MountPropagation)
		}
	}
}

// podNetwork.probes renders what deploy/ with the deploy/pod-netns
// component renders, object for object, in probed's DaemonSet and not in
// the shadow's (spec probes have no probed.io/from); off (the default),
// neither grants anything.
func TestChartPodNetwork(t *testing.T) {
	t.Parallel()
	wrapped, objs := chartMatchesComponent(t, "pod-netns", "podNetwork.probes=true")

	checkPodNetns(t, "deploy/pod-netns", renderedDaemonSet(t, wrapped), true)
	checkPodNetns(t, "podNetwork.probes", daemonSet(t, objs, "probed"), true)
	checkPodNetns(t, "the chart's defaults", renderedDaemonSet(t, helmTemplate(t, "p")), false)
	checkPodNetns(t, "deploy/", renderedDaemonSet(t, kustomize(t, "../../deploy")), false)
	withShadow := helmTemplate(t, "p", "podNetwork.probes=true", "shadow.enabled=true")
	checkPodNetns(t, "the shadow with podNetwork.probes", daemonSet(t, withShadow, "probed-shadow"), false)
	checkPodNetns(t, "probed beside the shadow", daemonSet(t, withShadow, "probed"), true)
}
