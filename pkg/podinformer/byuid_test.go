package podinformer

import (
	"testing"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"
)

func TestByUID(t *testing.T) {
	inf := cache.NewSharedIndexInformer(&cache.ListWatch{}, &v1.Pod{}, 0, cache.Indexers{})
	b, err := NewByUID(inf)
	if err != nil {
		t.Fatal(err)
	}
	pod := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "p", UID: "u1"}}
	if err := inf.GetIndexer().Add(pod); err != nil {
		t.Fatal(err)
	}
	if got, ok := b.Pod("u1"); !ok || got != pod {
		t.Errorf("Pod(u1) = %v, %v; want the cached pod", got, ok)
	}
	if _, ok := b.Pod("u2"); ok {
		t.Error("Pod(u2) found a pod")
	}
}
