//go:build integration

package integration

import (
	"fmt"
	"regexp"
	"sort"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// kubeletProbeLabels are the labels of the kubelet's prober_probe_total
// (pkg/kubelet/metrics: probe_type, result, container, pod, namespace,
// pod_uid); docs/migration.md joins the two series on them.
var kubeletProbeLabels = []string{"container", "namespace", "pod", "pod_uid", "probe_type", "result"}

// Shadow mode, as docs/migration.md runs it beside the kubelet:
// --probe-source=spec --dry-run runs an ordinary pod's spec probes (no
// annotation, no gate) and counts them in prober_probe_total with the
// kubelet's labels, and writes nothing: no status, no events, and a
// liveness probe failing past its threshold kills nothing. Like the
// kubelet, it then holds that probe until a new container instance appears
// (beside a real kubelet, the kubelet's own restart brings one), so the two
// counts stay comparable. And it counts where its verdict would have
// differed from the kubelet's status.
func TestShadowModeWritesNothing(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ip := loopbackIP()
	sick := startHTTPTarget(t, ip, false)
	tcpPort, _ := startTCPTarget(t, ip)
	httpGet := func(path string) v1.ProbeHandler {
		return v1.ProbeHandler{HTTPGet: &v1.HTTPGetAction{Path: path, Port: intstr.FromInt32(int32(sick.Port))}}
	}
	pod := &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "shadow", Namespace: e.ns},
		Spec: v1.PodSpec{NodeName: e.node, Containers: []v1.Container{{
			Name: "app", Image: "busybox",
			StartupProbe:   &v1.Probe{ProbeHandler: v1.ProbeHandler{TCPSocket: &v1.TCPSocketAction{Port: intstr.FromInt32(int32(tcpPort))}}, PeriodSeconds: 1},
			LivenessProbe:  &v1.Probe{ProbeHandler: httpGet("/healthz"), PeriodSeconds: 1, FailureThreshold: 3},
			ReadinessProbe: &v1.Probe{ProbeHandler: httpGet("/ready"), PeriodSeconds: 1},
		}}},
	}
	pod, err := client.CoreV1().Pods(e.ns).Create(e.ctx, pod, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	pod = e.runPod(pod, ip, time.Minute)
	rv := pod.ResourceVersion

	p := e.startProbed("--probe-source=spec", "--dry-run")
	series := func(probeType, result string) string {
		return `prober_probe_total{container="app",namespace="` + e.ns + `",pod="shadow",pod_uid="` + string(pod.UID) +
			`",probe_type="` + probeType + `",result="` + result + `"}`
	}
	value := func(line string) float64 {
		var v float64
		if f := strings.Fields(line); len(f) == 2 {
			_, _ = fmt.Sscan(f[1], &v)
		}
		return v
	}
	livenessState := func() string {
		for _, d := range p.debugProbes() {
			if d.PodName == "shadow" && d.ProbeType == "Liveness" {
				return d.State
			}
		}
		return ""
	}
	eventually(t, "liveness failing up to its threshold and held", 30*time.Second, func() bool {
		return livenessState() == "on-hold"
	})
	if l := p.metricLines(series("Liveness", "failed")); len(l) != 1 || value(l[0]) != 3 {
		t.Errorf("liveness failures counted: %q, want 3 (the threshold)", l)
	}
	for _, s := range []string{series("Startup", "successful"), series("Readiness", "failed")} {
		if len(p.metricLines(s)) != 1 {
			t.Errorf("no %s", s)
		}
	}

	// The kubelet's label names, no more and no fewer.
	name := regexp.MustCompile(`(\w+)="`)
	for _, line := range p.metricLines("prober_probe_total{") {
		var got []string
		for _, m := range name.FindAllStringSubmatch(line[:strings.IndexByte(line, '}')], -1) {
			got = append(got, m[1])
		}
		sort.Strings(got)
		if strings.Join(got, ",") != strings.Join(kubeletProbeLabels, ",") {
			t.Errorf("%s: labels %v, the kubelet's are %v", line, got, kubeletProbeLabels)
		}
	}

	// Nothing written, nothing killed.
	if got := e.pod("shadow"); got.ResourceVersion != rv {
		t.Errorf("shadow mode wrote the pod: resourceVersion %s -> %s; conditions %+v", rv, got.ResourceVersion, got.Status.Conditions)
	}
	if evs := e.events(pod.UID); len(evs) != 0 {
		t.Errorf("shadow mode emitted %d events, first %s: %q", len(evs), evs[0].Reason, evs[0].Message)
	}
	kills := p.metricLines("probed_container_kills_total{")
	if len(kills) == 0 {
		t.Error("no probed_container_kills_total series")
	}
	for _, line := range kills {
		if value(line) != 0 {
			t.Errorf("shadow mode tried to kill: %s", line)
		}
	}
	if l := p.metricLines(series("Liveness", "failed")); len(l) != 1 || value(l[0]) != 3 || livenessState() != "on-hold" {
		t.Errorf("the held liveness probe ran again: %q, state %q", l, livenessState())
	}

	// The kubelet's status (this harness writes ready and started) against
	// what probed would have written: readiness differs (its probe fails),
	// startup agrees. Counted once the difference outlasts two periods and
	// the slack, 12 s.
	eventually(t, "the readiness difference counted", 45*time.Second, func() bool {
		l := p.metricLines(`probed_shadow_disagreements_total{probe_type="Readiness"}`)
		return len(l) == 1 && value(l[0]) == 1
	})
	for _, m := range []string{`probed_shadow_disagreements{probe_type="Readiness"} 1`, `probed_shadow_disagreements{probe_type="Startup"} 0`,
		`probed_shadow_disagreements_total{probe_type="Startup"} 0`} {
		if l := p.metricLines(m); len(l) != 1 {
			t.Errorf("no %s on /metrics", m)
		}
	}
}
