//go:build e2e

package e2e

import (
	"context"
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
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/probed-dev/probed/pkg/probespec"
)

// TestPodSourceLatency measures, on the real node and in one run, what
// probed's pod source changes: probed runs first with --pod-source=apiserver
// (deploy/'s ClusterRole whole), then as the tier runs it, from the
// kubelet's Pods API (deploy/pod-source-kubelet). Under each, the same pods
// are created one after another (one at a time: each is deleted after its
// first probe), each a busybox whose container writes the
// node's uptime (/proc/uptime, 10 ms steps, one clock for every container)
// to a file on the host as it starts, and whose exec readiness probe
// (every second, in probed.io/probes) writes it once, on its first run:
// their difference is the delay from the container's start to probed's
// first probe (the exec's own start-up included, the same under both).
// Around each half the API server's /metrics give the pods watches open
// (apiserver_longrunning_requests, verb WATCH) and the watch events and
// bytes it sent for pods (apiserver_watch_events_total,
// apiserver_watch_events_sizes), whoever watched: the kubelet, the
// controller-manager and the scheduler under both, probed under the first.
//
// It is a measurement, not a check, and takes about two minutes: it runs
// only with E2E_POD_SOURCE_MEASURE set to the number of pods per source
// (hack/test.sh measure, in make test-all).
//
//	E2E_POD_SOURCE_MEASURE=10 go test -tags e2e -v -run '^TestPodSourceLatency$' ./test/e2e/
func TestPodSourceLatency(t *testing.T) {
	n, _ := strconv.Atoi(os.Getenv("E2E_POD_SOURCE_MEASURE"))
	if n < 1 {
		t.Skip("a measurement: set E2E_POD_SOURCE_MEASURE to the number of pods per pod source")
	}
	if podSource != "kubelet" {
		t.Skipf("the kubelet here serves no Pods API (probed's source is the %s)", podSource)
	}
	ctx := context.Background()
	dir := newSharedOutage(t, "pod-source-measure").dir
	// Whatever happens, the tier's probed again.
	t.Cleanup(func() {
		nd.SetDeployComponents(tierComponents...)
		if err := nd.DeployProbed(context.Background(), probedImage, probedArgs...); err != nil {
			t.Errorf("restoring the tier's probed: %v", err)
		}
	})
	var apiserverComponents []string
	for _, c := range tierComponents {
		if c == podSourceKubeletComponent {
			c = podSourceAutoComponent()
		}
		apiserverComponents = append(apiserverComponents, c)
	}
	var halves []sourceHalf
	for _, source := range []string{"apiserver", "kubelet"} {
		args := probedArgs
		if source == "apiserver" {
			nd.SetDeployComponents(apiserverComponents...)
			args = append(append([]string{}, probedArgs...), "--pod-source=apiserver")
		} else {
			nd.SetDeployComponents(tierComponents...)
		}
		t0 := time.Now()
		if err := nd.DeployProbed(ctx, probedImage, args...); err != nil {
			t.Fatalf("deploying probed with the %s as its pod source: %v", source, err)
		}
		if err := checkPodSource(ctx, source); err != nil {
			t.Fatal(err)
		}
		t.Logf("probed Ready with the %s as its pod source in %v", source, time.Since(t0).Round(100*time.Millisecond))
		halves = append(halves, measureSource(t, dir, source, n))
	}

	var b strings.Builder
	fmt.Fprintf(&b, "pod source, %d pods each, one at a time: container start -> probed's first probe (ms; median / mean / p90 / max);\n", n)
	fmt.Fprintf(&b, "the API server's pods watches open, and the watch events and bytes it sent for pods over the half (all watchers)\n")
	fmt.Fprintf(&b, "  %-9s  %-31s  %13s  %12s  %12s  %8s\n", "source", "first probe after start", "pods watches", "watch events", "watch bytes", "window")
	for _, h := range halves {
		fmt.Fprintf(&b, "  %-9s  %-31s  %13s  %12.0f  %12.0f  %7.1fs\n", h.source, h.latency(),
			fmt.Sprintf("%.0f (%.0f)", h.watchesBefore, h.watchesDuring), h.events, h.bytes, h.window.Seconds())
	}
	if len(halves) == 2 {
		fmt.Fprintf(&b, "  probed's share (apiserver - kubelet): %.0f pods watch(es), %.0f watch events, %.0f bytes\n",
			halves[0].watchesDuring-halves[1].watchesDuring, halves[0].events-halves[1].events, halves[0].bytes-halves[1].bytes)
	}
	t.Log("\n" + b.String())
}

// sourceHalf is what one pod source measured.
type sourceHalf struct {
	source                       string
	delays                       []time.Duration
	watchesBefore, watchesDuring float64
	events, bytes                float64
	window                       time.Duration
}

func (h sourceHalf) latency() string {
	if len(h.delays) == 0 {
		return "-"
	}
	ms := make([]float64, len(h.delays))
	sum := 0.0
	for i, d := range h.delays {
		ms[i] = float64(d) / float64(time.Millisecond)
		sum += ms[i]
	}
	slices.Sort(ms)
	return fmt.Sprintf("%5.0f / %5.0f / %5.0f / %5.0f", ms[len(ms)/2], sum/float64(len(ms)), ms[(len(ms)*9)/10], ms[len(ms)-1])
}

// measureSource creates n pods one after another, each once the one before
// has had its first probe and is deleted, and reads the API server's pods
// watch figures around them.
func measureSource(t *testing.T, dir, source string, n int) sourceHalf {
	t.Helper()
	ctx := context.Background()
	h := sourceHalf{source: source}
	time.Sleep(5 * time.Second) // let probed's start settle
	before := apiserverPodWatchMetrics(t)
	began := time.Now()
	label := "e2e.probed.io/pod-source-measure"
	uptime := func(file string) (float64, bool) {
		b, err := os.ReadFile(filepath.Join(dir, file))
		if err != nil {
			return 0, false
		}
		f := strings.Fields(string(b))
		if len(f) < 1 {
			return 0, false
		}
		v, err := strconv.ParseFloat(f[0], 64)
		return v, err == nil
	}
	var during podWatchMetrics
	for i := range n {
		name := fmt.Sprintf("measure-%s-%d", source, i)
		pod := &v1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: testNS, Labels: map[string]string{label: source},
				Annotations: map[string]string{probespec.ProbesAnnotation: readinessAnnotation(t, "sh", "-c",
					`test -s "/shared/$POD_NAME.probe" || cat /proc/uptime >"/shared/$POD_NAME.probe"`)}},
			Spec: v1.PodSpec{
				ReadinessGates:                []v1.PodReadinessGate{{ConditionType: gateCondition}},
				TerminationGracePeriodSeconds: ptr(int64(1)),
				AutomountServiceAccountToken:  ptr(false),
				EnableServiceLinks:            ptr(false),
				Containers: []v1.Container{{
					Name: "app", Image: imgBusybox, ImagePullPolicy: v1.PullNever,
					Command: []string{"/bin/sh", "-c", `cat /proc/uptime >"/shared/$POD_NAME.start"; trap "exit 0" TERM; sleep 100000 & wait`},
					Env: []v1.EnvVar{{Name: "POD_NAME", ValueFrom: &v1.EnvVarSource{
						FieldRef: &v1.ObjectFieldSelector{FieldPath: "metadata.name"}}}},
					VolumeMounts: []v1.VolumeMount{{Name: "shared", MountPath: "/shared"}},
				}},
				Volumes: []v1.Volume{{Name: "shared", VolumeSource: v1.VolumeSource{
					HostPath: &v1.HostPathVolumeSource{Path: dir, Type: ptr(v1.HostPathDirectory)}}}},
			},
		}
		if _, err := client.CoreV1().Pods(testNS).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			_ = client.CoreV1().Pods(testNS).Delete(context.Background(), name, metav1.DeleteOptions{GracePeriodSeconds: ptr(int64(0))})
		})
		var start, probe float64
		err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 2*time.Minute, true, func(context.Context) (bool, error) {
			var ok1, ok2 bool
			start, ok1 = uptime(name + ".start")
			probe, ok2 = uptime(name + ".probe")
			return ok1 && ok2, nil
		})
		if err != nil {
			t.Fatalf("%s (source %s): no start and first probe on the host: %v", name, source, err)
		}
		h.delays = append(h.delays, time.Duration((probe-start)*float64(time.Second)))
		if i == n/2 {
			during = apiserverPodWatchMetrics(t)
		}
		// One measured pod at a time: each one's exec probe every second
		// would otherwise load the machine more and more, whichever the
		// source.
		if err := client.CoreV1().Pods(testNS).Delete(ctx, name, metav1.DeleteOptions{GracePeriodSeconds: ptr(int64(0))}); err != nil {
			t.Fatal(err)
		}
		time.Sleep(time.Second)
	}
	pollT(t, "the measured pods gone", 2*time.Minute, func() bool {
		l, err := client.CoreV1().Pods(testNS).List(ctx, metav1.ListOptions{LabelSelector: label + "=" + source})
		return err == nil && len(l.Items) == 0
	})
	time.Sleep(2 * time.Second) // the last deletions' events
	after := apiserverPodWatchMetrics(t)
	h.window = time.Since(began)
	h.watchesBefore, h.watchesDuring = before.watches, during.watches
	h.events, h.bytes = after.events-before.events, after.bytes-before.bytes
	t.Logf("%s: first probe after the container's start %v", source, h.delays)
	return h
}

// podWatchMetrics are the API server's pods watch figures.
type podWatchMetrics struct {
	watches       float64 // open WATCH requests on pods
	events, bytes float64 // watch events sent for pods, and their bytes
}

// apiserverPodWatchMetrics reads the API server's /metrics (as the admin).
func apiserverPodWatchMetrics(t *testing.T) podWatchMetrics {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	body, err := client.CoreV1().RESTClient().Get().AbsPath("/metrics").DoRaw(ctx)
	if err != nil {
		t.Fatalf("the API server's /metrics: %v", err)
	}
	var m podWatchMetrics
	for _, l := range strings.Split(string(body), "\n") {
		name, rest, ok := strings.Cut(l, "{")
		if !ok {
			continue
		}
		labels, value, ok := strings.Cut(rest, "} ")
		if !ok || !strings.Contains(labels, `resource="pods"`) {
			continue
		}
		v, err := strconv.ParseFloat(strings.TrimSpace(value), 64)
		if err != nil {
			continue
		}
		switch {
		case name == "apiserver_longrunning_requests" && strings.Contains(labels, `verb="WATCH"`) && strings.Contains(labels, `subresource=""`):
			m.watches += v
		case name == "apiserver_watch_events_total":
			m.events += v
		case name == "apiserver_watch_events_sizes_sum":
			m.bytes += v
		}
	}
	return m
}
