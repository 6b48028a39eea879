package manager

import (
	"context"
	"fmt"
	"testing"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
)

func TestKubeletMinor(t *testing.T) {
	for in, want := range map[string]string{
		"v1.37.2":            "1.37",
		"v1.35.4-eks-1a2b3c": "1.35",
		"1.33.0":             "1.33",
		"v1.36.0+k3s1":       "1.36",
	} {
		if got, err := KubeletMinor(in); err != nil || got != want {
			t.Errorf("KubeletMinor(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	for _, bad := range []string{"", "vX", "latest"} {
		if got, err := KubeletMinor(bad); err == nil {
			t.Errorf("KubeletMinor(%q) = %q, want an error", bad, got)
		}
	}
}

// The User-Agent version is the node's kubelet's; a Node that cannot be
// read leaves the fallback.
func TestNodeUserAgentVersion(t *testing.T) {
	client := fake.NewClientset(&v1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: "n1"},
		Status:     v1.NodeStatus{NodeInfo: v1.NodeSystemInfo{KubeletVersion: "v1.36.3"}},
	})
	if got := NodeUserAgentVersion(context.Background(), client, "n1", "1.34"); got != "1.36" {
		t.Errorf("version %q, want 1.36", got)
	}
	denied := fake.NewClientset()
	denied.PrependReactor("get", "nodes", func(k8stesting.Action) (bool, runtime.Object, error) {
		return true, nil, apierrors.NewForbidden(schema.GroupResource{Resource: "nodes"}, "n1", fmt.Errorf("rbac"))
	})
	// Refused: the fallback at once, with no asking again.
	if got := NodeUserAgentVersion(context.Background(), denied, "n1", "1.34"); got != "1.34" {
		t.Errorf("forbidden: version %q, want the fallback", got)
	}
	// A Node without a version: the fallback at once.
	bare := fake.NewClientset(&v1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1"}})
	if got := NodeUserAgentVersion(context.Background(), bare, "n1", "1.34"); got != "1.34" {
		t.Errorf("no version: %q, want the fallback", got)
	}
}
