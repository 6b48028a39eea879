package containerstatus

import (
	"testing"

	v1 "k8s.io/api/core/v1"
)

func TestFind(t *testing.T) {
	pod := &v1.Pod{Status: v1.PodStatus{
		ContainerStatuses: []v1.ContainerStatus{
			{Name: "app", ContainerID: "containerd://app"},
			{Name: "pending"},
			{Name: "both", ContainerID: "containerd://regular"},
		},
		InitContainerStatuses: []v1.ContainerStatus{
			{Name: "sidecar", ContainerID: "containerd://sidecar"},
			{Name: "pending", ContainerID: "containerd://init-pending"},
			{Name: "both", ContainerID: "containerd://init"},
		},
		EphemeralContainerStatuses: []v1.ContainerStatus{{Name: "debug", ContainerID: "containerd://debug"}},
	}}
	for _, tc := range []struct {
		name, any, created string // container IDs; "-" is nil
	}{
		{"app", "containerd://app", "containerd://app"},
		{"sidecar", "containerd://sidecar", "containerd://sidecar"},
		// The regular list comes first; one without an ID is passed over
		// only by FindCreated.
		{"both", "containerd://regular", "containerd://regular"},
		{"pending", "", "containerd://init-pending"},
		{"debug", "-", "-"},
		{"absent", "-", "-"},
	} {
		id := func(cs *v1.ContainerStatus) string {
			if cs == nil {
				return "-"
			}
			if cs.Name != tc.name {
				t.Errorf("%s: found %q", tc.name, cs.Name)
			}
			return cs.ContainerID
		}
		if got := id(Find(pod, tc.name)); got != tc.any {
			t.Errorf("Find(%q) = %q; want %q", tc.name, got, tc.any)
		}
		if got := id(FindCreated(pod, tc.name)); got != tc.created {
			t.Errorf("FindCreated(%q) = %q; want %q", tc.name, got, tc.created)
		}
	}
	// The pointer is into the pod, as callers that read it in place expect.
	if cs := Find(pod, "app"); cs != &pod.Status.ContainerStatuses[0] {
		t.Error("Find returned a copy")
	}
}
