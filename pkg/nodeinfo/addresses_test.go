package nodeinfo

import (
	"context"
	"fmt"
	"testing"

	"github.com/probed-dev/probed/pkg/kubeclient/fromclientset"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
)

func TestNodeAddresses(t *testing.T) {
	client := fake.NewClientset(&v1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: "n1"},
		Status: v1.NodeStatus{Addresses: []v1.NodeAddress{
			{Type: v1.NodeInternalIP, Address: "10.0.0.7"},
			{Type: v1.NodeExternalIP, Address: "203.0.113.7"},
			{Type: v1.NodeHostName, Address: "n1.example"},
		}},
	})
	gets := 0
	client.PrependReactor("get", "nodes", func(k8stesting.Action) (bool, runtime.Object, error) {
		gets++
		return false, nil, nil
	})
	read := Addresses(fromclientset.New(client), "n1")
	for range 3 {
		got, err := read(context.Background())
		if err != nil || fmt.Sprint(got) != "[10.0.0.7 203.0.113.7]" {
			t.Fatalf("addresses = %v, %v", got, err)
		}
	}
	if gets != 1 {
		t.Errorf("%d GETs; want 1 (cached)", gets)
	}

	// Without permission: no addresses, no error, and no more asking.
	denied := fake.NewClientset()
	gets = 0
	denied.PrependReactor("get", "nodes", func(k8stesting.Action) (bool, runtime.Object, error) {
		gets++
		return true, nil, apierrors.NewForbidden(schema.GroupResource{Resource: "nodes"}, "n1", fmt.Errorf("rbac"))
	})
	read = Addresses(fromclientset.New(denied), "n1")
	for range 3 {
		if got, err := read(context.Background()); err != nil || len(got) != 0 {
			t.Fatalf("forbidden: %v, %v", got, err)
		}
	}
	if gets != 1 {
		t.Errorf("%d GETs after a refusal; want 1", gets)
	}

	// Other errors are returned, so the guard keeps what it had.
	missing := Addresses(fromclientset.New(fake.NewClientset()), "n1")
	if _, err := missing(context.Background()); err == nil {
		t.Error("missing Node: no error")
	}
}
