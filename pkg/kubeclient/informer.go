package kubeclient

import (
	"context"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/tools/cache"
)

// Lister is a typed client's List and Watch.
type Lister[L runtime.Object] interface {
	List(ctx context.Context, opts metav1.ListOptions) (L, error)
	Watch(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error)
}

// NewInformer is the shared informer client-go's informer factory would
// build for one resource (no resync, a namespace index), listing and
// watching through l with tweak applied to every request. client is the
// Interface l came from: a fake clientset behind it declines watch-list.
func NewInformer[L runtime.Object](client any, l Lister[L], example runtime.Object, tweak func(*metav1.ListOptions)) cache.SharedIndexInformer {
	lw := &cache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, opts metav1.ListOptions) (runtime.Object, error) {
			tweak(&opts)
			return l.List(ctx, opts)
		},
		WatchFuncWithContext: func(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
			tweak(&opts)
			return l.Watch(ctx, opts)
		},
	}
	return cache.NewSharedIndexInformerWithOptions(cache.ToListWatcherWithWatchListSemantics(lw, client), example,
		cache.SharedIndexInformerOptions{Indexers: cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc}})
}
