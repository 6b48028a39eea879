package podinformer

import (
	"fmt"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"
)

const uidIndex = "uid"

// ByUID looks the informer's pods up by UID. It promises the latest pod
// the informer cache holds, never a copy to mutate: the manager, the
// workers and the status writer all read pods through it, so the lookup
// lives with the pod source rather than with any of them.
type ByUID struct {
	indexer cache.Indexer
}

// NewByUID adds a UID index to inf, which must not have started yet.
func NewByUID(inf cache.SharedIndexInformer) (*ByUID, error) {
	err := inf.AddIndexers(cache.Indexers{uidIndex: func(obj any) ([]string, error) {
		if p, ok := obj.(*v1.Pod); ok {
			return []string{string(p.UID)}, nil
		}
		return nil, nil
	}})
	if err != nil {
		return nil, fmt.Errorf("podinformer: adding the pod UID index: %w", err)
	}
	return &ByUID{indexer: inf.GetIndexer()}, nil
}

// Pod returns the latest cached pod with this UID.
func (b *ByUID) Pod(uid types.UID) (*v1.Pod, bool) {
	objs, err := b.indexer.ByIndex(uidIndex, string(uid))
	if err != nil || len(objs) == 0 {
		return nil, false
	}
	p, ok := objs[0].(*v1.Pod)
	return p, ok
}
