//go:build integration

package integration

import (
	"fmt"
	"runtime"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"

	"github.com/probed-dev/probed/pkg/podinformer"
)

// Issue 12 item 4: the pod informer drops managedFields. This measures what
// that saves per pod on pods as the API server really returns them: created
// by one client, status written by another (as the kubelet does) and
// conditions server-side applied by probed. The figures go into
// docs/observability.md's sizing section. Not parallel: heap figures need a
// process in which no other test allocates (parallel tests start only after
// every sequential one has finished).
func TestInformerMemoryPerPod(t *testing.T) {
	e := newEnv(t)
	ip := loopbackIP()
	tg := startHTTPTarget(t, ip, true)
	const n = 100
	for i := range n {
		pod := e.createPod(fmt.Sprintf("mem-%d", i), mustJSON(probes{
			"app":  {"readinessProbe": httpProbe(tg.Port, "/ready", nil), "livenessProbe": httpProbe(tg.Port, "/ready", nil)},
			"side": {"readinessProbe": httpProbe(tg.Port, "/ready", nil)},
		}), true, container{name: "app"}, container{name: "side"})
		e.runPod(pod, ip, time.Minute)
	}
	e.startProbed()
	for i := range n {
		e.waitCond(fmt.Sprintf("mem-%d", i), "probed.io/ready", v1.ConditionTrue, 60*time.Second)
	}
	list, err := client.CoreV1().Pods(e.ns).List(e.ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(list.Items[0].ManagedFields) < 2 {
		t.Fatalf("pods carry %d managedFields entries; want the writers'", len(list.Items[0].ManagedFields))
	}
	perPod := func(transform func(any) (any, error)) float64 {
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		store := cache.NewStore(cache.MetaNamespaceKeyFunc)
		for i := range list.Items {
			// A fresh copy each, as a watch delivers them.
			obj := any(list.Items[i].DeepCopy())
			if transform != nil {
				obj, _ = transform(obj)
			}
			if err := store.Add(obj); err != nil {
				t.Fatal(err)
			}
		}
		runtime.GC()
		runtime.ReadMemStats(&after)
		runtime.KeepAlive(store)
		return float64(int64(after.HeapAlloc)-int64(before.HeapAlloc)) / n
	}
	full := perPod(nil)
	stripped := perPod(podinformer.StripManagedFields)
	t.Logf("informer cache per pod (2 containers, %d managedFields entries): %.0f B with managedFields, %.0f B without (%.2fx)",
		len(list.Items[0].ManagedFields), full, stripped, stripped/full)
	if stripped >= full {
		t.Errorf("stripping managedFields saved nothing: %.0f B vs %.0f B per pod", stripped, full)
	}
}
