package servingca

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/probed-dev/probed/pkg/kubeclient/fromclientset"

	"go.uber.org/goleak"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/probed-dev/probed/pkg/endpoints"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m, goleak.IgnoreTopFunction("k8s.io/klog/v2.(*flushDaemon).run.func1"))
}

var pod = Pod{Namespace: "probed-system", Name: "probed-x", UID: "uid-x"}

func newCA(t *testing.T) []byte {
	t.Helper()
	ss, err := endpoints.NewSelfSigned([]string{"node-a"})
	if err != nil {
		t.Fatal(err)
	}
	return ss.CAPEM
}

func podObject(p Pod) *corev1.Pod {
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: p.Namespace, Name: p.Name, UID: p.UID}}
}

// Sync creates the pod's ConfigMap, owned by the pod; writes nothing when
// it already holds the CA; and replaces another CA (a restart's new one).
func TestSync(t *testing.T) {
	ctx := context.Background()
	c := fake.NewClientset()
	ca := newCA(t)
	p := &Publisher{Client: fromclientset.New(c), Pod: pod, CAPEM: ca}
	if err := p.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	cm, err := c.CoreV1().ConfigMaps(pod.Namespace).Get(ctx, pod.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got, err := CA(cm, podObject(pod)); err != nil || string(got) != string(ca) {
		t.Fatalf("published CA: %v, %q", err, got)
	}
	if cm.Labels[Label] != "true" {
		t.Errorf("labels %v", cm.Labels)
	}
	writes := func() int {
		n := 0
		for _, a := range c.Actions() {
			if a.GetVerb() == "create" || a.GetVerb() == "update" {
				n++
			}
		}
		return n
	}
	if err := p.Sync(ctx); err != nil || writes() != 1 {
		t.Errorf("a second Sync: %v, %d writes in all, want 1", err, writes())
	}
	p.CAPEM = newCA(t)
	if err := p.Sync(ctx); err != nil || writes() != 2 {
		t.Fatalf("Sync with a new CA: %v, %d writes, want 2", err, writes())
	}
	cm, _ = c.CoreV1().ConfigMaps(pod.Namespace).Get(ctx, pod.Name, metav1.GetOptions{})
	if got, _ := CA(cm, podObject(pod)); string(got) != string(p.CAPEM) {
		t.Error("the new CA was not published")
	}
}

// A client trusts a ConfigMap only for the pod that owns it.
func TestCARefusesOthers(t *testing.T) {
	ca := newCA(t)
	for name, tc := range map[string]struct {
		cm  *corev1.ConfigMap
		pod Pod
	}{
		"another UID":  {ConfigMap(pod, ca), Pod{Namespace: pod.Namespace, Name: pod.Name, UID: "uid-y"}},
		"another name": {ConfigMap(pod, ca), Pod{Namespace: pod.Namespace, Name: "probed-y", UID: pod.UID}},
		"not a PEM":    {ConfigMap(pod, []byte("garbage")), pod},
	} {
		if _, err := CA(tc.cm, podObject(tc.pod)); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}

// Run retries a failed write with back-off, on its clock, until it lands.
func TestRunRetries(t *testing.T) {
	c := fake.NewClientset()
	var fails atomic.Int32
	fails.Store(2)
	c.PrependReactor("create", "configmaps", func(k8stesting.Action) (bool, runtime.Object, error) {
		if fails.Add(-1) >= 0 {
			return true, nil, errors.New("the API server is away")
		}
		return false, nil, nil
	})
	clk := clocktesting.NewFakeClock(time.Now())
	p := &Publisher{Client: fromclientset.New(c), Pod: pod, CAPEM: newCA(t), Clock: clk, Resync: time.Hour}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); p.Run(ctx) }()
	defer func() { cancel(); <-done }()
	deadline := time.Now().Add(10 * time.Second)
	for {
		if _, err := c.CoreV1().ConfigMaps(pod.Namespace).Get(ctx, pod.Name, metav1.GetOptions{}); err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("never published")
		}
		if clk.HasWaiters() {
			clk.Step(time.Minute)
		}
		time.Sleep(time.Millisecond)
	}
}

func TestPodValidate(t *testing.T) {
	if err := (Pod{Namespace: "ns", Name: "n"}).Validate(); err == nil || !strings.Contains(err.Error(), "POD_UID") {
		t.Errorf("a pod without UID: %v", err)
	}
	if err := pod.Validate(); err != nil {
		t.Error(err)
	}
}
