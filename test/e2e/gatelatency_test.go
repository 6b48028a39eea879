//go:build e2e

package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apimachinery/pkg/watch"
)

// TestGateLatency measures, on the real node, what going Ready or NotReady
// through probed's readiness gate costs against the kubelet's own path. Two
// pods read one file on the node (a hostPath): while it exists, both
// answer /readyz with 503. The kubelet probes one (a spec readinessProbe),
// probed the other (probed.io/probes and the probed.io/ready gate), both
// every second with thresholds of 1. The test creates and removes the file
// and times, from its own watch of both pods, how long after each flip:
//
//	kubelet Ready   the kubelet-probed pod's Ready (probe, one status write)
//	probed cond     probed's ready.probed.io/app (probe, probed's write)
//	probed Ready    the probed pod's Ready (then the kubelet's watch of that
//	                write, its pod sync, and its own status write)
//
// Each flip lands at a random point of both probes' periods, so the times
// from the flip carry up to a period of wait; "Ready after cond" does not.
// It is a measurement, not a check, and takes a minute: it runs only with
// E2E_GATE_LATENCY set to the number of flips each way (e.g. 10).
//
//	E2E_GATE_LATENCY=10 go test -tags e2e -v -run '^TestGateLatency$' ./test/e2e/
func TestGateLatency(t *testing.T) {
	flips, _ := strconv.Atoi(os.Getenv("E2E_GATE_LATENCY"))
	if flips < 1 {
		t.Skip("a measurement: set E2E_GATE_LATENCY to the number of flips each way")
	}
	ctx := context.Background()
	dir := t.TempDir()
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(dir, "unready")
	const label = "e2e.probed.io/gate-latency"
	probe := &v1.Probe{
		ProbeHandler:  v1.ProbeHandler{HTTPGet: &v1.HTTPGetAction{Path: "/readyz", Port: intstr.FromInt32(8080)}},
		PeriodSeconds: 1, TimeoutSeconds: 1, FailureThreshold: 1, SuccessThreshold: 1,
	}
	pod := func(name string) *v1.Pod {
		return &v1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: testNS, Labels: map[string]string{label: "yes"}},
			Spec: v1.PodSpec{
				AutomountServiceAccountToken:  ptr(false),
				EnableServiceLinks:            ptr(false),
				TerminationGracePeriodSeconds: ptr(int64(1)),
				Volumes: []v1.Volume{{Name: "flip", VolumeSource: v1.VolumeSource{
					HostPath: &v1.HostPathVolumeSource{Path: dir, Type: ptr(v1.HostPathDirectory)}}}},
				Containers: []v1.Container{{
					Name: "app", Image: imgTarget, ImagePullPolicy: v1.PullNever,
					Args:         []string{"--http=:8080", "--unready-file=/flip/unready"},
					Ports:        []v1.ContainerPort{{ContainerPort: 8080}},
					VolumeMounts: []v1.VolumeMount{{Name: "flip", MountPath: "/flip", ReadOnly: true}},
				}},
			},
		}
	}
	kubeletPod := pod("gate-latency-kubelet")
	kubeletPod.Spec.Containers[0].ReadinessProbe = probe
	probedPod := pod("gate-latency-probed")
	spec, err := json.Marshal(map[string]map[string]*v1.Probe{"app": {"readinessProbe": probe}})
	if err != nil {
		t.Fatal(err)
	}
	probedPod.Annotations = map[string]string{"probed.io/probes": string(spec)}
	probedPod.Spec.ReadinessGates = []v1.PodReadinessGate{{ConditionType: "probed.io/ready"}}
	for _, p := range []*v1.Pod{kubeletPod, probedPod} {
		if _, err := client.CoreV1().Pods(testNS).Create(ctx, p, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			_ = client.CoreV1().Pods(testNS).Delete(context.Background(), p.Name, metav1.DeleteOptions{GracePeriodSeconds: ptr(int64(0))})
		})
	}

	selector := label + "=yes"
	var list *v1.PodList
	if err := wait.PollUntilContextTimeout(ctx, 250*time.Millisecond, podStartTimeout, true, func(ctx context.Context) (bool, error) {
		var err error
		list, err = client.CoreV1().Pods(testNS).List(ctx, metav1.ListOptions{LabelSelector: selector})
		return err == nil && len(list.Items) == 2 && isReady(&list.Items[0]) && isReady(&list.Items[1]), nil
	}); err != nil {
		t.Fatalf("both pods Ready: %v", err)
	}
	w, err := client.CoreV1().Pods(testNS).Watch(ctx, metav1.ListOptions{LabelSelector: selector, ResourceVersion: list.ResourceVersion})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()

	// seen holds, per flip, when each of the three was first seen at the
	// flip's state.
	type sample struct{ kubeletReady, probedCond, probedReady time.Duration }
	var down, up []sample
	for i := range 2 * flips {
		wantReady := i%2 == 1
		var flip time.Time
		if wantReady {
			err = os.Remove(file)
		} else {
			err = os.WriteFile(file, nil, 0o644)
		}
		flip = time.Now()
		if err != nil {
			t.Fatal(err)
		}
		want := v1.ConditionFalse
		if wantReady {
			want = v1.ConditionTrue
		}
		var s sample
		deadline := time.After(30 * time.Second)
		for s.kubeletReady == 0 || s.probedCond == 0 || s.probedReady == 0 {
			select {
			case ev, ok := <-w.ResultChan():
				if !ok {
					t.Fatal("the watch ended")
				}
				at := time.Since(flip)
				p, isPod := ev.Object.(*v1.Pod)
				if !isPod || ev.Type != watch.Modified {
					continue
				}
				switch p.Name {
				case kubeletPod.Name:
					if s.kubeletReady == 0 && condStatus(p, string(v1.PodReady)) == want {
						s.kubeletReady = at
					}
				case probedPod.Name:
					if s.probedCond == 0 && condStatus(p, "ready.probed.io/app") == want {
						s.probedCond = at
					}
					if s.probedReady == 0 && condStatus(p, string(v1.PodReady)) == want {
						s.probedReady = at
					}
				}
			case <-deadline:
				t.Fatalf("flip %d: not all seen within 30s: %+v", i, s)
			}
		}
		if wantReady {
			up = append(up, s)
		} else {
			down = append(down, s)
		}
		// Off the probes' beat for the next flip.
		time.Sleep(time.Duration(300+137*i%700) * time.Millisecond)
	}

	var b strings.Builder
	fmt.Fprintf(&b, "gate latency, %d flips each way, periodSeconds 1 (ms after the flip; median / mean / max)\n", flips)
	for _, dir := range []struct {
		name    string
		samples []sample
	}{{"NotReady", down}, {"Ready", up}} {
		col := func(f func(sample) time.Duration) string {
			var ms []float64
			for _, s := range dir.samples {
				ms = append(ms, float64(f(s))/float64(time.Millisecond))
			}
			slices.Sort(ms)
			sum := 0.0
			for _, v := range ms {
				sum += v
			}
			return fmt.Sprintf("%6.0f / %6.0f / %6.0f", ms[len(ms)/2], sum/float64(len(ms)), ms[len(ms)-1])
		}
		fmt.Fprintf(&b, "  to %-8s kubelet Ready     %s\n", dir.name, col(func(s sample) time.Duration { return s.kubeletReady }))
		fmt.Fprintf(&b, "  to %-8s probed cond       %s\n", dir.name, col(func(s sample) time.Duration { return s.probedCond }))
		fmt.Fprintf(&b, "  to %-8s probed Ready      %s\n", dir.name, col(func(s sample) time.Duration { return s.probedReady }))
		fmt.Fprintf(&b, "  to %-8s Ready after cond  %s\n", dir.name, col(func(s sample) time.Duration { return s.probedReady - s.probedCond }))
	}
	t.Log(b.String())
}
