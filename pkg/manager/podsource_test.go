package manager

import (
	"context"
	"fmt"
	"path/filepath"
	"reflect"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/cache"
	podsv1alpha1 "k8s.io/kubelet/pkg/apis/pods/v1alpha1"
	"k8s.io/utils/clock"

	"github.com/probed-dev/probed/pkg/podinformer"
	"github.com/probed-dev/probed/pkg/podinformer/kubelettest"
	"github.com/probed-dev/probed/pkg/prober"
	"github.com/probed-dev/probed/pkg/probespec"
	"github.com/probed-dev/probed/pkg/results"
	"github.com/probed-dev/probed/pkg/status"
)

// sourceProber records where each probe was sent.
type sourceProber struct {
	mu      sync.Mutex
	targets map[string]string
}

func (p *sourceProber) Probe(_ context.Context, t probespec.ProbeType, _ *v1.Probe, target prober.Target, _ prober.EventSink) (results.Result, string, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.targets[target.ContainerID+"/"+t.String()] = fmt.Sprintf("ip=%s ips=%v uid=%s", target.PodIP, target.PodIPs, target.PodUID)
	return results.Success, "ok", nil
}

// derived is everything the manager made of the pods: its workers, where
// their probes went, the events it recorded and the states it published.
type derived struct {
	Workers map[string]string
	Targets map[string]string
	Events  []string
	States  map[types.UID]string
}

// sourceTable is one pod for each thing probed reads from a pod.
func sourceTable(t *testing.T) []*v1.Pod {
	always := v1.ContainerRestartPolicyAlways
	annotated := runningPod("annotated", "u-annotated", annotate(map[string]map[string]any{"app": {"readinessProbe": tcp1, "livenessProbe": tcp2}}), "app")
	annotated.Status.PodIPs = []v1.PodIP{{IP: "127.0.0.1"}, {IP: "::1"}}

	approved := stampedPod(t, "approved", "u-approved", map[string]map[string]any{"app": {"livenessProbe": execProbe("cat", "/tmp/ok")}})
	unapproved := runningPod("unapproved", "u-unapproved", annotate(map[string]map[string]any{"app": {"readinessProbe": execProbe("true")}}), "app")

	sidecar := runningPod("sidecar", "u-sidecar", annotate(map[string]map[string]any{
		"app": {"readinessProbe": tcp1}, "proxy": {"startupProbe": tcp2}, "init": {"readinessProbe": tcp1},
	}), "app")
	sidecar.Spec.InitContainers = []v1.Container{{Name: "init", Image: "img"}, {Name: "proxy", Image: "img", RestartPolicy: &always}}
	sidecar.Status.InitContainerStatuses = []v1.ContainerStatus{
		{Name: "init", ContainerID: "containerd://u-sidecar-init", State: v1.ContainerState{Terminated: &v1.ContainerStateTerminated{ExitCode: 0}}},
		{Name: "proxy", ContainerID: "containerd://u-sidecar-proxy", State: v1.ContainerState{Running: &v1.ContainerStateRunning{StartedAt: metav1.NewTime(time.Now().Add(-time.Minute))}}},
	}

	deleting := runningPod("deleting", "u-deleting", annotate(map[string]map[string]any{"app": {"readinessProbe": tcp1, "livenessProbe": tcp2}}), "app")
	now := metav1.NewTime(time.Now())
	deleting.DeletionTimestamp, deleting.DeletionGracePeriodSeconds = &now, new(int64)
	*deleting.DeletionGracePeriodSeconds = 30
	deleting.Finalizers = []string{"example.com/keep"}

	waiting := runningPod("waiting", "u-waiting", annotate(map[string]map[string]any{"app": {"readinessProbe": tcp1}}), "app")
	waiting.Status.ContainerStatuses[0].ContainerID = ""
	waiting.Status.ContainerStatuses[0].State = v1.ContainerState{Waiting: &v1.ContainerStateWaiting{Reason: "ContainerCreating"}}

	invalid := runningPod("invalid", "u-invalid", `{"app": {"readinessProbe": {"tcpSocket": {}}}}`, "app")

	restartNever := runningPod("never", "u-never", annotate(map[string]map[string]any{"app": {"livenessProbe": tcp1}}), "app")
	restartNever.Spec.RestartPolicy = v1.RestartPolicyNever

	pods := []*v1.Pod{annotated, approved, unapproved, sidecar, deleting, waiting, invalid, restartNever}
	for i, p := range pods {
		p.ResourceVersion = fmt.Sprint(10 + i)
		p.Spec.ReadinessGates = []v1.PodReadinessGate{{ConditionType: status.PodReadyCondition}}
	}
	return pods
}

// TestPodSourcesDeriveTheSame (issue 37): everything probed derives from a
// pod (its probes from the annotation, the approved reach, container IDs,
// pod IPs, deletion, the restart rules of sidecars and init containers)
// reads the same whether the pod came from the API server or from the
// kubelet's Pods API, through the protobuf the kubelet marshals.
func TestPodSourcesDeriveTheSame(t *testing.T) {
	pods := sourceTable(t)
	fromAPI := deriveFrom(t, pods, func(t *testing.T, ctx context.Context) cache.SharedIndexInformer {
		client := fake.NewClientset()
		for _, p := range pods {
			if _, err := client.CoreV1().Pods(p.Namespace).Create(ctx, p, metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
		}
		return informers.NewSharedInformerFactory(client, 0).Core().V1().Pods().Informer()
	})
	fromKubelet := deriveFrom(t, pods, func(t *testing.T, ctx context.Context) cache.SharedIndexInformer {
		k := kubelettest.Start(t, filepath.Join(t.TempDir(), "pods-api.sock"))
		for _, p := range pods {
			k.Set(p, true)
		}
		conn, err := podinformer.DialKubelet(k.Socket)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { conn.Close() })
		lw := podinformer.NewKubeletListerWatcher(podsv1alpha1.NewPodsClient(conn), time.Minute, nil, clock.RealClock{})
		inf, err := podinformer.NewFromKubelet(lw)
		if err != nil {
			t.Fatal(err)
		}
		return inf
	})
	if !reflect.DeepEqual(fromAPI, fromKubelet) {
		t.Errorf("the sources differ:\nAPI server: %+v\nkubelet:    %+v", fromAPI, fromKubelet)
	}
	// The table shows something only if each row made the manager do
	// something: these are the rows' marks.
	for _, want := range []string{"annotated/app/Readiness", "annotated/app/Liveness", "approved/app/Liveness", "sidecar/proxy/Startup", "sidecar/app/Readiness", "never/app/Liveness"} {
		if _, ok := fromAPI.Workers[want]; !ok {
			t.Errorf("no worker %s: %v", want, fromAPI.Workers)
		}
	}
	for _, unwanted := range []string{"unapproved/app/Readiness", "sidecar/init/Readiness"} {
		if _, ok := fromAPI.Workers[unwanted]; ok {
			t.Errorf("worker %s runs", unwanted)
		}
	}
	if fromAPI.Targets["containerd://u-annotated-app/Readiness"] != "ip=127.0.0.1 ips=[127.0.0.1 ::1] uid=u-annotated" {
		t.Errorf("annotated's readiness target: %q", fromAPI.Targets["containerd://u-annotated-app/Readiness"])
	}
}

func deriveFrom(t *testing.T, pods []*v1.Pod, informer func(*testing.T, context.Context) cache.SharedIndexInformer) derived {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	inf := informer(t, ctx)
	snk := &sink{states: map[types.UID]status.PodState{}, forgot: map[types.UID]bool{}}
	rec := &recorder{}
	p := &sourceProber{targets: map[string]string{}}
	mgr, err := New(Options{
		Informer: inf, Source: probespec.ProbeSourceAnnotation, Prober: p, Recorder: rec, Status: snk,
		Metrics:              NewMetrics(prometheus.NewRegistry()),
		RequireReadinessGate: true, RequireApprovedReach: true, TrustPodStatusIPs: true,
		ReachPolicy: &fakeReachPolicy{inForce: true},
		DaemonStart: time.Now().Add(-time.Hour),
	})
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{}, 2)
	go func() { defer func() { done <- struct{}{} }(); inf.RunWithContext(ctx) }()
	go func() { defer func() { done <- struct{}{} }(); mgr.Run(ctx) }()
	defer func() { cancel(); <-done; <-done }()

	// Settled: every worker with a container probed once, and the pods'
	// states stable over a few polls.
	var last derived
	stable := 0
	err = wait.PollUntilContextTimeout(context.Background(), 50*time.Millisecond, 15*time.Second, true, func(context.Context) (bool, error) {
		d := snapshot(mgr, p, rec, snk)
		if reflect.DeepEqual(d, last) && len(d.Targets) > 0 {
			stable++
		} else {
			stable = 0
		}
		last = d
		return stable >= 10, nil
	})
	if err != nil {
		t.Fatalf("the manager did not settle: %+v", last)
	}
	return last
}

func snapshot(mgr *Manager, p *sourceProber, rec *recorder, snk *sink) derived {
	d := derived{Workers: map[string]string{}, Targets: map[string]string{}, States: map[types.UID]string{}}
	for _, s := range mgr.Snapshots() {
		d.Workers[s.PodName+"/"+s.Container+"/"+s.ProbeType] = s.Spec + " " + s.ContainerID + " " + string(s.State)
	}
	p.mu.Lock()
	for k, v := range p.targets {
		d.Targets[k] = v
	}
	p.mu.Unlock()
	rec.mu.Lock()
	for _, e := range rec.events {
		d.Events = append(d.Events, e.container+" "+e.reason+" "+e.message)
	}
	rec.mu.Unlock()
	sort.Strings(d.Events)
	snk.mu.Lock()
	for uid, st := range snk.states {
		d.States[uid] = fmt.Sprintf("%+v", st)
	}
	snk.mu.Unlock()
	return d
}
