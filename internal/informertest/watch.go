// Package informertest helps unit tests run client-go informers on a fake
// clientset.
package informertest

import (
	"sync"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
)

// WatchStarted returns a channel closed when the first watch of resource
// starts on client. The fake clientset's watch has no resourceVersion: an
// object created between an informer's list and its watch is never
// delivered, and WaitForCacheSync returns after the list, not the watch.
// Call it before starting the informers, and Wait on it after their sync.
func WatchStarted(client *fake.Clientset, resource string) <-chan struct{} {
	started := make(chan struct{})
	var once sync.Once
	client.PrependWatchReactor(resource, func(k8stesting.Action) (bool, watch.Interface, error) {
		once.Do(func() { close(started) })
		return false, nil, nil // the default reactor makes the watch
	})
	return started
}

// Wait waits for started, or fails the test.
func Wait(t testing.TB, started <-chan struct{}) {
	t.Helper()
	select {
	case <-started:
	case <-time.After(10 * time.Second):
		t.Fatal("the informer never started its watch")
	}
}
