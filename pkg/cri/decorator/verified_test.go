package decorator

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/probed-dev/probed/pkg/cri/none"

	"github.com/probed-dev/probed/pkg/cri"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

// labeledRuntime is a node's runtime with labeled containers: it records
// every exec, stop and label lookup it is asked for.
type labeledRuntime struct {
	mu         sync.Mutex
	containers map[string]cri.RuntimeOwner // by qualified ID
	lookups    map[string]int
	execs      []string
	stops      []string
	// gate, when set, holds every lookup until closed.
	gate chan struct{}
}

func (f *labeledRuntime) ContainerOwner(ctx context.Context, id string) (cri.RuntimeOwner, error) {
	if f.gate != nil {
		<-f.gate
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.lookups[id]++
	o, ok := f.containers[id]
	if !ok {
		return cri.RuntimeOwner{}, cri.ErrContainerNotFound
	}
	return o, nil
}

func (f *labeledRuntime) ExecInContainer(_ context.Context, id string, _ []string, _ time.Duration) ([]byte, int, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.execs = append(f.execs, id)
	return []byte("ok"), 0, nil
}

func (f *labeledRuntime) StopContainer(_ context.Context, id string, _ time.Duration) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.stops = append(f.stops, id)
	return nil
}

func (f *labeledRuntime) Ready(context.Context) error { return nil }
func (f *labeledRuntime) Close() error                { return nil }
func (f *labeledRuntime) Name() string                { return "labeled" }

func (f *labeledRuntime) counts(id string) (lookups, execs, stops int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, e := range f.execs {
		if e == id {
			execs++
		}
	}
	for _, s := range f.stops {
		if s == id {
			stops++
		}
	}
	return f.lookups[id], execs, stops
}

// kubeletLabels are the labels the kubelet puts on a container of pod
// ns/name (uid) and on its sandbox.
func kubeletLabels(ns, name, uid, container string) cri.RuntimeOwner {
	sb := map[string]string{cri.LabelPodNamespace: ns, cri.LabelPodName: name, cri.LabelPodUID: uid, "app": "web"}
	c := map[string]string{cri.LabelPodNamespace: ns, cri.LabelPodName: name, cri.LabelPodUID: uid, cri.LabelContainerName: container}
	return cri.RuntimeOwner{Labels: c, SandboxLabels: sb, KindOK: true}
}

const (
	victimID   = "containerd://victim"
	attackerID = "containerd://attacker"
)

func newLabeledNode() *labeledRuntime {
	return &labeledRuntime{lookups: map[string]int{}, containers: map[string]cri.RuntimeOwner{
		victimID:   kubeletLabels("kube-system", "etcd-node", "uid-victim", "etcd"),
		attackerID: kubeletLabels("tenant", "web", "uid-web", "app"),
	}}
}

var attacker = cri.Owner{PodNamespace: "tenant", PodName: "web", PodUID: "uid-web", Container: "app"}

// A pod status whose container ID points at another pod's container gets
// no exec and no stop: refused, counted, and said in words that do not name
// the other pod. The pod's own container works, and the runtime is asked
// whose it is once.
func TestVerifiedRefusesAnotherPodsContainer(t *testing.T) {
	rt := newLabeledNode()
	reg := prometheus.NewRegistry()
	v, err := NewVerified(rt, NewMetrics(reg))
	if err != nil {
		t.Fatal(err)
	}
	ctx := cri.WithOwner(context.Background(), attacker)

	_, _, err = v.ExecInContainer(ctx, victimID, []string{"cat", "/etc/kubernetes/pki/etcd/server.key"}, time.Second)
	var mismatch *cri.OwnerMismatchError
	if !errors.As(err, &mismatch) {
		t.Fatalf("exec into another pod's container: %v, want an *cri.OwnerMismatchError", err)
	}
	if err := v.StopContainer(ctx, victimID, time.Second); !errors.As(err, &mismatch) {
		t.Fatalf("stop of another pod's container: %v, want an *cri.OwnerMismatchError", err)
	}
	if err := v.CheckOwner(ctx, victimID); !errors.As(err, &mismatch) {
		t.Fatalf("CheckOwner of another pod's container: %v", err)
	}
	if _, execs, stops := rt.counts(victimID); execs != 0 || stops != 0 {
		t.Fatalf("the victim's container got %d execs and %d stops; want none", execs, stops)
	}
	for _, leak := range []string{"kube-system", "etcd"} {
		if strings.Contains(err.Error(), leak) || strings.Contains(mismatch.Error(), leak) {
			t.Errorf("refusal %q names the other pod (%s)", err, leak)
		}
	}
	if want := `container ID containerd://victim from the pod's status is not container "app" of this pod on the container runtime; probed refuses to exec into it`; err.Error() != want {
		t.Errorf("refusal = %q, want %q", err, want)
	}
	if got := testutil.ToFloat64(v.m.refusals.WithLabelValues("exec")); got != 1 {
		t.Errorf("refusals{op=exec} = %v, want 1", got)
	}
	if got := testutil.ToFloat64(v.m.refusals.WithLabelValues("stop")); got != 2 {
		t.Errorf("refusals{op=stop} = %v, want 2", got)
	}

	// The attacker's own container: every exec and the stop go through,
	// after one lookup.
	for range 5 {
		if out, code, err := v.ExecInContainer(ctx, attackerID, []string{"true"}, time.Second); err != nil || code != 0 || string(out) != "ok" {
			t.Fatalf("exec into the pod's own container: %q %d %v", out, code, err)
		}
	}
	if err := v.StopContainer(ctx, attackerID, time.Second); err != nil {
		t.Fatal(err)
	}
	if lookups, execs, stops := rt.counts(attackerID); lookups != 1 || execs != 5 || stops != 1 {
		t.Errorf("own container: %d lookups, %d execs, %d stops; want 1, 5, 1", lookups, execs, stops)
	}
	if lookups, _, _ := rt.counts(victimID); lookups != 1 {
		t.Errorf("the victim's labels were read %d times; want once (cached)", lookups)
	}
}

// Each label is checked: the container's pod UID, namespace, name and
// container name, the sandbox's, and that it is a pod's container at all.
// A mirror pod's containers carry its static pod's UID.
func TestVerifiedChecksEveryLabel(t *testing.T) {
	own := cri.Owner{PodNamespace: "ns", PodName: "p", PodUID: "uid-p", Container: "app"}
	mutate := func(f func(o *cri.RuntimeOwner)) cri.RuntimeOwner {
		o := kubeletLabels("ns", "p", "uid-p", "app")
		f(&o)
		return o
	}
	for _, tc := range []struct {
		name  string
		owner cri.Owner
		got   cri.RuntimeOwner
		ok    bool
	}{
		{"the pod's own container", own, kubeletLabels("ns", "p", "uid-p", "app"), true},
		{"another container of the same pod", own, kubeletLabels("ns", "p", "uid-p", "sidecar"), false},
		{"a pod of the same name before it was recreated", own, kubeletLabels("ns", "p", "uid-old", "app"), false},
		{"same name, other namespace", own, kubeletLabels("other", "p", "uid-p", "app"), false},
		{"a sandbox of another pod", own, mutate(func(o *cri.RuntimeOwner) { o.SandboxLabels[cri.LabelPodUID] = "uid-x" }), false},
		{"no sandbox", own, mutate(func(o *cri.RuntimeOwner) { o.SandboxLabels = nil }), false},
		{"not a CRI container", own, mutate(func(o *cri.RuntimeOwner) { o.KindOK = false }), false},
		{"no labels at all", own, cri.RuntimeOwner{KindOK: true}, false},
		{"empty owner, unlabeled container", cri.Owner{}, cri.RuntimeOwner{KindOK: true}, false},
		{"a mirror pod's container, static pod UID", cri.Owner{PodNamespace: "kube-system", PodName: "etcd-n", PodUID: "uid-mirror", StaticPodUID: "uid-static", Container: "etcd"},
			kubeletLabels("kube-system", "etcd-n", "uid-static", "etcd"), true},
		{"a static pod's UID, claimed by a pod that is not its mirror", cri.Owner{PodNamespace: "kube-system", PodName: "etcd-n", PodUID: "uid-mirror", Container: "etcd"},
			kubeletLabels("kube-system", "etcd-n", "uid-static", "etcd"), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := tc.got.Matches(tc.owner); got != tc.ok {
				t.Errorf("matches = %v, want %v (runtime says %s)", got, tc.ok, tc.got.Describe())
			}
		})
	}
}

// Calls without an owner are refused outright; a container the runtime
// does not know is its error, not cached; callers asking together make one
// lookup.
func TestVerifiedEdges(t *testing.T) {
	rt := newLabeledNode()
	v, err := NewVerified(rt, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := v.ExecInContainer(context.Background(), attackerID, []string{"true"}, time.Second); !errors.Is(err, cri.ErrNoOwner) {
		t.Errorf("exec without an owner: %v, want cri.ErrNoOwner", err)
	}
	if err := v.StopContainer(context.Background(), attackerID, time.Second); !errors.Is(err, cri.ErrNoOwner) {
		t.Errorf("stop without an owner: %v, want cri.ErrNoOwner", err)
	}
	ctx := cri.WithOwner(context.Background(), attacker)
	for range 2 {
		if _, _, err := v.ExecInContainer(ctx, "containerd://gone", []string{"true"}, time.Second); !errors.Is(err, cri.ErrContainerNotFound) {
			t.Errorf("exec into an unknown container: %v", err)
		}
	}
	if lookups, execs, _ := rt.counts("containerd://gone"); lookups != 2 || execs != 0 {
		t.Errorf("unknown container: %d lookups, %d execs; want 2 (not cached), 0", lookups, execs)
	}

	rt.gate = make(chan struct{})
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, _, err := v.ExecInContainer(ctx, "containerd://fresh", []string{"true"}, time.Second)
			errs <- err
		}()
	}
	rt.mu.Lock()
	rt.containers["containerd://fresh"] = kubeletLabels("tenant", "web", "uid-web", "app")
	rt.mu.Unlock()
	close(rt.gate)
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Errorf("concurrent exec: %v", err)
		}
	}
	if lookups, execs, _ := rt.counts("containerd://fresh"); lookups > 8 || execs != 8 {
		t.Errorf("concurrent first calls: %d lookups, %d execs", lookups, execs)
	}
	if _, err := NewVerified(none.None(), nil); err == nil {
		t.Error("NewVerified accepted a runtime that cannot read labels")
	}
}
