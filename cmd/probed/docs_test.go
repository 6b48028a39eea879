package main

import (
	"context"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/spf13/pflag"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/probed-dev/probed/internal/docgen"
	"github.com/probed-dev/probed/pkg/cri/decorator"
	"github.com/probed-dev/probed/pkg/cri/none"
	"github.com/probed-dev/probed/pkg/kubeclient/fromclientset"
	"github.com/probed-dev/probed/pkg/prober"
	"github.com/probed-dev/probed/pkg/probespec"
	"github.com/probed-dev/probed/pkg/reachpolicy"
	"github.com/probed-dev/probed/pkg/results"
	"github.com/probed-dev/probed/pkg/worker"
)

//go:generate go test -run TestDocs -update .

const docsUpdateCmd = "go test ./cmd/probed/ -run TestDocs -update"

// docDefaults are probed's options as an empty command line leaves them,
// with the environment they read unset: the docs' defaults.
func docDefaults(t *testing.T) (*options, *pflag.FlagSet) {
	t.Helper()
	t.Setenv("NODE_NAME", "")
	o := &options{}
	fs, _, _ := newFlagSet(o)
	if err := fs.Parse(nil); err != nil {
		t.Fatal(err)
	}
	return o, fs
}

// docs/flags.md's table of probed's flags is generated from its flag set:
// each flag, what it takes, its default and its usage.
func TestDocsFlags(t *testing.T) {
	_, fs := docDefaults(t)
	if err := docgen.Table("../../"+docgen.FlagsDoc, *update, docsUpdateCmd,
		docgen.Region{Name: "probed-flags", Body: docgen.FlagTable(fs)}, "## probed", docgen.FlagKnown(fs)); err != nil {
		t.Error(err)
	}
}

// docs/observability.md's table of probed's metrics is generated from the
// metrics the daemon registers (newDaemonMetrics, and the two gauges run
// registers through the parts that own them), with their defaults' labels.
func TestDocsMetrics(t *testing.T) {
	o, _ := docDefaults(t)
	reg := docgen.NewRegistry()
	m := newDaemonMetrics(reg, o)
	decorator.NewHealth(none.None(), 0, 0, nil, reg)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	// The probe-reach gauge is absent until the policy was read once, and
	// prober_probe_* until a worker counts a result: give each its first.
	reach, err := reachpolicy.New(reachpolicy.Options{Client: fromclientset.New(fake.NewClientset()), Policy: o.ProbeReachPolicy, Node: "docs", Registry: reg})
	if err != nil {
		t.Fatal(err)
	}
	reachCtx, stopReach := context.WithCancel(ctx)
	reachDone := make(chan struct{})
	go func() { defer close(reachDone); reach.Run(reachCtx) }()
	defer func() { stopReach(); <-reachDone }()
	stopWorker := runDocWorker(ctx, t, m.workers, reg.Registry)
	defer stopWorker()
	stopTLSWorker := runDocTLSWorker(ctx, t, m.workers, reg.Registry)
	defer stopTLSWorker()
	if err := wait.PollUntilContextCancel(ctx, 10*time.Millisecond, true, func(context.Context) (bool, error) {
		return reach.Known(), nil
	}); err != nil {
		t.Fatalf("the probe-reach policy was never judged: %v", err)
	}

	families, err := reg.Families("probed_", "prober_")
	if err != nil {
		t.Fatal(err)
	}
	if err := docgen.Table("../../"+docgen.MetricsDoc, *update, docsUpdateCmd,
		docgen.Region{Name: "probed-metrics", Body: docgen.MetricTable(families)},
		"### probed's metrics", docgen.FamilyKnown(families)); err != nil {
		t.Error(err)
	}
}

// runDocWorker runs one real readiness worker against a running container
// until its first result is on reg's page, and returns what stops it.
func runDocWorker(ctx context.Context, t *testing.T, m *worker.Metrics, reg prometheus.Gatherer) func() {
	t.Helper()
	pod := &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "docs", Namespace: "docs", UID: types.UID("docs")},
		Spec:       v1.PodSpec{Containers: []v1.Container{{Name: "app"}}},
		Status: v1.PodStatus{Phase: v1.PodRunning, ContainerStatuses: []v1.ContainerStatus{{
			Name: "app", ContainerID: "containerd://docs", Started: new(true),
			State: v1.ContainerState{Running: &v1.ContainerStateRunning{StartedAt: metav1.NewTime(time.Now().Add(-time.Hour))}},
		}}},
	}
	w := worker.New(worker.Config{
		PodUID: pod.UID, PodNamespace: pod.Namespace, PodName: pod.Name,
		Container: &pod.Spec.Containers[0], ProbeType: probespec.Readiness,
		Spec:   &v1.Probe{PeriodSeconds: 1, TimeoutSeconds: 1, SuccessThreshold: 1, FailureThreshold: 3},
		Prober: succeeding{}, Pods: onePod{pod}, Results: results.NewManager(),
		DaemonStart: time.Now().Add(-time.Hour), Metrics: m,
	})
	done := make(chan struct{})
	go func() { defer close(done); w.Run(ctx) }()
	stop := func() { w.Stop(); <-done }
	err := wait.PollUntilContextCancel(ctx, 10*time.Millisecond, true, func(context.Context) (bool, error) {
		w.Trigger()
		mfs, err := reg.Gather()
		n := 0
		for _, mf := range mfs {
			if name := mf.GetName(); name == "prober_probe_total" || name == "prober_probe_duration_seconds" {
				n++
			}
		}
		return n == 2, err
	})
	if err != nil {
		stop()
		t.Fatalf("the worker's first result never reached its metrics: %v", err)
	}
	return stop
}

type succeeding struct{}

func (succeeding) Probe(context.Context, probespec.ProbeType, *v1.Probe, prober.Target, prober.EventSink) (results.Result, string, error) {
	return results.Success, "", nil
}

type onePod struct{ pod *v1.Pod }

func (p onePod) Pod(uid types.UID) (*v1.Pod, bool) { return p.pod, uid == p.pod.UID }
