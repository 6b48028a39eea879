//go:build e2e

package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/probed-dev/probed/pkg/probespec"
)

// Scenarios of kubelet parity that only a real kubelet shows: who restarts
// a container and when, the start-up order of sidecars, and what adoption
// leaves with the kubelet. These run beside the "Probing container"
// scenarios (TestProbing/scenarios/parity); the webhook ones under
// TestWebhook.
var parityScenarios = []struct {
	name string
	run  func(t *testing.T)
}{
	{"annotated-kill-parity", testAnnotatedKillParity},
	{"restart-rules-new-instance-probed", testRestartRulesProbedProbesTheNewInstance},
	{"restart-count-timing", testRestartCountTimingProbedAndKubelet},
}

// pollPod polls the pod until cond holds and returns it.
func pollPod(t *testing.T, ctx context.Context, ns, name, what string, timeout time.Duration, cond func(p *v1.Pod) bool) *v1.Pod {
	t.Helper()
	var last *v1.Pod
	err := wait.PollUntilContextTimeout(ctx, 500*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
		p, err := client.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		last = p
		return cond(p), nil
	})
	if err != nil {
		t.Fatalf("waiting for %s: %v; pod: %s", what, err, summarize(last))
	}
	return last
}

// podEvents lists the events of a pod by source component.
func podEvents(t *testing.T, ctx context.Context, p *v1.Pod, component string) []v1.Event {
	t.Helper()
	list, err := client.CoreV1().Events(p.Namespace).List(ctx, metav1.ListOptions{FieldSelector: "involvedObject.uid=" + string(p.UID)})
	if err != nil {
		t.Fatal(err)
	}
	var out []v1.Event
	for _, e := range list.Items {
		if e.Source.Component == component || e.ReportingController == component {
			out = append(out, e)
		}
	}
	return out
}

// waitEvent waits for an event of the pod from component with reason and
// a message containing msg.
func waitEvent(t *testing.T, ctx context.Context, p *v1.Pod, component, reason, msg string) v1.Event {
	t.Helper()
	var found v1.Event
	err := wait.PollUntilContextTimeout(ctx, 500*time.Millisecond, eventTimeout, true, func(ctx context.Context) (bool, error) {
		for _, e := range podEvents(t, ctx, p, component) {
			if e.Reason == reason && strings.Contains(e.Message, msg) {
				found = e
				return true, nil
			}
		}
		return false, nil
	})
	if err != nil {
		list, _ := client.CoreV1().Events(p.Namespace).List(ctx, metav1.ListOptions{FieldSelector: "involvedObject.uid=" + string(p.UID)})
		t.Fatalf("no %s event %q from %s; events: %s", reason, msg, component, formatEvents(list.Items))
	}
	t.Logf("event %s %s from %s: %q", found.Type, found.Reason, component, found.Message)
	return found
}

// containerStatus is the named container's status in p (init containers
// first), or nil.
func containerStatus(p *v1.Pod, name string) *v1.ContainerStatus {
	for _, list := range [][]v1.ContainerStatus{p.Status.InitContainerStatuses, p.Status.ContainerStatuses} {
		for i := range list {
			if list[i].Name == name {
				return &list[i]
			}
		}
	}
	return nil
}

// onFailureScript runs until SIGTERM, which it answers with exit 0, as
// many apps do. Its first run stops being alive 8 s in; a later run stays
// alive and completes 10 s in.
const onFailureScript = `trap 'exit 0' TERM
touch /tmp/alive
if [ ! -f /data/ran ]; then touch /data/ran; sleep 8; rm /tmp/alive; while true; do sleep 1; done; fi
i=0; while [ $i -lt 10 ]; do sleep 1; i=$((i+1)); done; exit 0`

func onFailurePodSpec(liveness *v1.Probe) v1.PodSpec {
	return v1.PodSpec{
		RestartPolicy:                 v1.RestartPolicyOnFailure,
		TerminationGracePeriodSeconds: ptr(int64(5)),
		AutomountServiceAccountToken:  ptr(false),
		Volumes:                       []v1.Volume{{Name: "data", VolumeSource: v1.VolumeSource{EmptyDir: &v1.EmptyDirVolumeSource{}}}},
		Containers: []v1.Container{{
			Name: "app", Image: imgBusybox, ImagePullPolicy: v1.PullNever,
			Command:        []string{"/bin/sh", "-c", onFailureScript},
			VolumeMounts:   []v1.VolumeMount{{Name: "data", MountPath: "/data"}},
			LivenessProbe:  liveness,
			ReadinessProbe: &v1.Probe{ProbeHandler: execHandler("true"), PeriodSeconds: 1},
		}},
	}
}

func aliveProbe() *v1.Probe {
	return &v1.Probe{ProbeHandler: execHandler("cat", "/tmp/alive"), PeriodSeconds: 1, FailureThreshold: 2}
}

// Issue 21, 1: a Job (restartPolicy OnFailure) whose container exits 0 on
// SIGTERM and fails its liveness probe. Through the webhook its liveness
// probe stays with the kubelet (its readiness probe moves): the kubelet
// kills and restarts the container in one pass, whatever the exit code, so
// the hung run is restarted and the Job completes after a second run. Had
// probed stopped it, the exit 0 would have ended the Job as if it had
// completed.
func testOnFailureJobThroughWebhook(t *testing.T, ctx context.Context, ns string) {
	job := &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{Name: "report", Namespace: ns},
		Spec: batchv1.JobSpec{
			BackoffLimit: ptr(int32(3)),
			Template:     v1.PodTemplateSpec{Spec: onFailurePodSpec(aliveProbe())},
		},
	}
	if _, err := client.BatchV1().Jobs(ns).Create(ctx, job, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	var pod *v1.Pod
	pollE2E(t, "the Job's pod", 2*time.Minute, func() bool {
		pods, err := client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: "job-name=report"})
		if err != nil || len(pods.Items) != 1 {
			return false
		}
		pod = &pods.Items[0]
		return true
	})
	if pod.Spec.Containers[0].LivenessProbe == nil {
		t.Fatalf("the liveness probe of an OnFailure pod was adopted; annotations %v", pod.Annotations)
	}
	if pod.Spec.Containers[0].ReadinessProbe != nil || pod.Annotations[probespec.AdoptedAnnotation] != "app/readinessProbe" {
		t.Errorf("the readiness probe should have moved: %s = %q", probespec.AdoptedAnnotation, pod.Annotations[probespec.AdoptedAnnotation])
	}
	p := pollPod(t, ctx, ns, pod.Name, "the pod to succeed", 3*time.Minute, func(p *v1.Pod) bool {
		return p.Status.Phase == v1.PodSucceeded || p.Status.Phase == v1.PodFailed
	})
	cs := containerStatus(p, "app")
	if p.Status.Phase != v1.PodSucceeded || cs == nil || cs.RestartCount != 1 {
		t.Fatalf("phase %s, restarts %v: want Succeeded after one restart (the hung first run killed and restarted)", p.Status.Phase, cs)
	}
	waitEvent(t, ctx, p, "kubelet", "Killing", "Container app failed liveness probe, will be restarted")
	if evs := podEvents(t, ctx, p, "probed"); len(evs) > 0 {
		for _, e := range evs {
			if e.Reason == "Killing" {
				t.Errorf("probed killed the container: %q", e.Message)
			}
		}
	}
}

// Issue 31, 1b and 4: what follows a kill by probed is what follows the
// kubelet's, for liveness probes declared in probed.io/probes. Two pods,
// side by side:
//   - the OnFailure Job's container above, whose app exits 0 on SIGTERM:
//     probed refuses its liveness probe (InvalidProbe, naming the fix), so
//     nothing stops it and the pod never ends as if it had completed (it
//     used to: probed stopped it, and the exit 0 made the pod Succeeded);
//   - a restartPolicy Never pod whose only app container, beside a sidecar,
//     fails its liveness probe, and whose SIGTERM trap takes 4 s and exits
//     0: the kubelet's own kill would be the pod's, so probed says
//     "Stopping container app" and stops it with the pod's 10 s, not the
//     probe's 1 s (which would have SIGKILLed it: exit 137, pod Failed);
//     the kubelet then stops the sidecar, and the pod Succeeded.
func testAnnotatedKillParity(t *testing.T) {
	ctx := context.Background()
	create := func(pod *v1.Pod) *v1.Pod {
		created, err := client.CoreV1().Pods(testNS).Create(ctx, pod, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			_ = client.CoreV1().Pods(testNS).Delete(context.Background(), pod.Name, metav1.DeleteOptions{GracePeriodSeconds: ptr(int64(0))})
		})
		return created
	}
	spec := onFailurePodSpec(nil)
	spec.Containers[0].ReadinessProbe = nil
	job := create(&v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "onfailure-annotated", Namespace: testNS, Annotations: map[string]string{
		probespec.ProbesAnnotation: `{"app":{"livenessProbe":{"exec":{"command":["cat","/tmp/alive"]},"periodSeconds":1,"failureThreshold":2}}}`}}, Spec: spec})

	const lastApp = `trap 'sleep 4; exit 0' TERM; touch /tmp/alive; sleep 3; rm /tmp/alive; while true; do sleep 1 & wait $!; done`
	const quietSidecar = `trap 'exit 0' TERM; while true; do sleep 1 & wait $!; done`
	last := create(&v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "never-last-container", Namespace: testNS, Annotations: map[string]string{
			probespec.ProbesAnnotation: `{"app":{"livenessProbe":{"exec":{"command":["cat","/tmp/alive"]},"periodSeconds":1,"failureThreshold":1,"terminationGracePeriodSeconds":1}}}`}},
		Spec: v1.PodSpec{
			RestartPolicy:                 v1.RestartPolicyNever,
			TerminationGracePeriodSeconds: ptr(int64(10)),
			AutomountServiceAccountToken:  ptr(false),
			InitContainers: []v1.Container{{Name: "proxy", Image: imgBusybox, ImagePullPolicy: v1.PullNever,
				RestartPolicy: ptr(v1.ContainerRestartPolicyAlways), Command: []string{"/bin/sh", "-c", quietSidecar}}},
			Containers: []v1.Container{{Name: "app", Image: imgBusybox, ImagePullPolicy: v1.PullNever, Command: []string{"/bin/sh", "-c", lastApp}}},
		},
	})

	p := pollPod(t, ctx, testNS, last.Name, "the Never pod to end", 2*time.Minute, func(p *v1.Pod) bool {
		return p.Status.Phase == v1.PodSucceeded || p.Status.Phase == v1.PodFailed
	})
	cs := containerStatus(p, "app")
	if p.Status.Phase != v1.PodSucceeded || cs == nil || cs.State.Terminated == nil || cs.State.Terminated.ExitCode != 0 {
		t.Errorf("Never pod: phase %s, app %s; want Succeeded, exit 0 after its 4 s SIGTERM trap within the pod's 10 s (the probe's 1 s would have SIGKILLed it: 137)",
			p.Status.Phase, summarize(p))
	}
	waitEvent(t, ctx, p, "probed", "Killing", "Stopping container app")
	waitEvent(t, ctx, p, "kubelet", "Killing", "Stopping container proxy")
	for _, e := range podEvents(t, ctx, p, "probed") {
		if e.Reason == "Killing" && strings.Contains(e.Message, "failed liveness probe") {
			t.Errorf("probed's Killing says %q; the kubelet's own kill would have said Stopping container", e.Message)
		}
	}

	refused := waitEvent(t, ctx, job, "probed", "InvalidProbe", `container "app" livenessProbe: Forbidden: under restartPolicy OnFailure`)
	if !strings.Contains(refused.Message, "declare it as the container's livenessProbe in the pod spec") || refused.InvolvedObject.FieldPath != "spec.containers{app}" {
		t.Errorf("InvalidProbe %q on %q: want the fix named, on the container", refused.Message, refused.InvolvedObject.FieldPath)
	}

	// The Job's app stopped being alive 8 s in: a kill would have come at
	// once. Watch it run on past that, never stopped by probed.
	started := pollPod(t, ctx, testNS, job.Name, "the Job's app running", podStartTimeout, func(p *v1.Pod) bool {
		cs := containerStatus(p, "app")
		return cs != nil && cs.State.Running != nil
	})
	until := containerStatus(started, "app").State.Running.StartedAt.Add(15 * time.Second)
	for time.Now().Before(until) {
		p := pollPod(t, ctx, testNS, job.Name, "the Job's pod", 30*time.Second, func(*v1.Pod) bool { return true })
		if cs := containerStatus(p, "app"); p.Status.Phase != v1.PodRunning || cs == nil || cs.RestartCount != 0 || cs.State.Running == nil {
			t.Fatalf("the Job's pod %s: its refused liveness probe stopped it", summarize(p))
		}
		time.Sleep(time.Second)
	}
	for _, e := range podEvents(t, ctx, job, "probed") {
		if e.Reason == "Killing" {
			t.Errorf("probed killed the Job's container: %q", e.Message)
		}
	}
}

// Issue 21, 2: a sidecar whose startup probe passes 15 s in. Through the
// webhook its startup probe stays with the kubelet, which starts the app
// container only once it has passed; its readiness probe moves to probed.
func testSidecarStartupThroughWebhook(t *testing.T, ctx context.Context, ns string) {
	pod := &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "mesh", Namespace: ns},
		Spec: v1.PodSpec{
			TerminationGracePeriodSeconds: ptr(int64(1)),
			AutomountServiceAccountToken:  ptr(false),
			InitContainers: []v1.Container{{
				Name: "proxy", Image: imgBusybox, ImagePullPolicy: v1.PullNever,
				RestartPolicy:  ptr(v1.ContainerRestartPolicyAlways),
				Command:        []string{"/bin/sh", "-c", "sleep 15; touch /tmp/started; exec sleep 3600"},
				StartupProbe:   &v1.Probe{ProbeHandler: execHandler("cat", "/tmp/started"), PeriodSeconds: 1, FailureThreshold: 120},
				ReadinessProbe: &v1.Probe{ProbeHandler: execHandler("cat", "/tmp/started"), PeriodSeconds: 1},
			}},
			Containers: []v1.Container{{Name: "app", Image: imgBusybox, ImagePullPolicy: v1.PullNever, Command: []string{"sleep", "3600"}}},
		},
	}
	created, err := client.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	proxy := created.Spec.InitContainers[0]
	if proxy.StartupProbe == nil || proxy.ReadinessProbe != nil {
		t.Fatalf("sidecar probes after admission: startup %v, readiness %v; want the startup probe kept, the readiness probe moved", proxy.StartupProbe, proxy.ReadinessProbe)
	}
	p := pollPod(t, ctx, ns, pod.Name, "the app container running", 2*time.Minute, func(p *v1.Pod) bool {
		cs := containerStatus(p, "app")
		return cs != nil && cs.State.Running != nil
	})
	proxyStarted := containerStatus(p, "proxy").State.Running.StartedAt.Time
	appStarted := containerStatus(p, "app").State.Running.StartedAt.Time
	t.Logf("sidecar running at %s, app at %s: %v later", proxyStarted.Format("15:04:05"), appStarted.Format("15:04:05"), appStarted.Sub(proxyStarted))
	if appStarted.Sub(proxyStarted) < 12*time.Second {
		t.Errorf("the app started %v after the sidecar, before its 15 s startup probe could pass", appStarted.Sub(proxyStarted))
	}
	pollPod(t, ctx, ns, pod.Name, "Ready, through probed's readiness of the sidecar", time.Minute, func(p *v1.Pod) bool {
		return isReady(p) && condStatus(p, "ready.probed.io/proxy") == v1.ConditionTrue
	})
}

// Issue 21, 6: a hostNetwork pod whose readiness probe names a loopback
// host, which probed's default host policy refuses. Through the webhook it
// stays with the kubelet, which makes the pod Ready; the creator reads why
// in a warning.
func testRefusedHostThroughWebhook(t *testing.T, ctx context.Context, ns string) {
	port := freeTCPPort(t)
	pod := &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "hostnet", Namespace: ns},
		Spec: v1.PodSpec{
			HostNetwork:                   true,
			TerminationGracePeriodSeconds: ptr(int64(1)),
			AutomountServiceAccountToken:  ptr(false),
			Containers: []v1.Container{{
				Name: "app", Image: imgTarget, ImagePullPolicy: v1.PullNever,
				Args: []string{fmt.Sprintf("--http=:%d", port)},
				ReadinessProbe: &v1.Probe{ProbeHandler: v1.ProbeHandler{HTTPGet: &v1.HTTPGetAction{
					Host: "127.0.0.2", Port: intstr.FromInt32(int32(port)), Path: "/readyz"}}, PeriodSeconds: 1},
				LivenessProbe: &v1.Probe{ProbeHandler: tcpSocketHandler(port), PeriodSeconds: 5},
			}},
		},
	}
	rec := &warningRecorder{}
	cfg := rest.CopyConfig(nd.RESTConfig())
	cfg.WarningHandler = rec
	creator, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	created, err := creator.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	want := `probed: app/readinessProbe stays with the kubelet: httpGet.host "127.0.0.2": 127.0.0.2 is loopback, refused by --probe-host-policy=deny-node-local`
	if got := rec.list(); !slices.Contains(got, want) {
		t.Errorf("warnings %q, want one %q", got, want)
	}
	c := created.Spec.Containers[0]
	if c.ReadinessProbe == nil || c.LivenessProbe != nil {
		t.Fatalf("after admission: readiness %v, liveness %v; want the readiness probe kept, the liveness probe moved", c.ReadinessProbe, c.LivenessProbe)
	}
	pollPod(t, ctx, ns, pod.Name, "Ready through the kubelet's readiness probe", 2*time.Minute, isReady)
}

// warningRecorder keeps the warnings an API client is sent.
type warningRecorder struct {
	mu   sync.Mutex
	seen []string
}

func (r *warningRecorder) HandleWarningHeader(_ int, _ string, text string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.seen = append(r.seen, text)
}

func (r *warningRecorder) list() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.seen)
}

// Issue 22, 4: a pod with restartPolicy Never whose container has its own
// restart rule: exit 42 runs it again (KEP-5307, on by default from 1.35).
// Its first run exits 42; probed keeps probing the new instance, which
// becomes ready.
func testRestartRulesProbedProbesTheNewInstance(t *testing.T) {
	s := newSC(t, "restart-rules-new-instance-probed", regular)
	s.group = "parity"
	script := `if [ ! -f /data/ran ]; then touch /data/ran; sleep 8; exit 42; fi; touch /tmp/ready; exec sleep 3600`
	pod := s.newPod("app", shell(script), probes{
		Readiness: &v1.Probe{ProbeHandler: execHandler("cat", "/tmp/ready"), PeriodSeconds: 1},
		// A liveness kill would end the pod (exit 137 matches no rule), so
		// its exec gets upstream's 5 s: at 1 s it timed out three times on
		// CI's node at 97 % CPU pressure.
		Liveness: &v1.Probe{ProbeHandler: execHandler("true"), PeriodSeconds: 2, TimeoutSeconds: 5},
	})
	pod.Spec.RestartPolicy = v1.RestartPolicyNever
	pod.Spec.TerminationGracePeriodSeconds = ptr(int64(1))
	pod.Spec.Volumes = []v1.Volume{{Name: "data", VolumeSource: v1.VolumeSource{EmptyDir: &v1.EmptyDirVolumeSource{}}}}
	c := &pod.Spec.Containers[0]
	c.VolumeMounts = []v1.VolumeMount{{Name: "data", MountPath: "/data"}}
	c.RestartPolicy = ptr(v1.ContainerRestartPolicyNever)
	c.RestartPolicyRules = []v1.ContainerRestartRule{{
		Action:    v1.ContainerRestartRuleActionRestart,
		ExitCodes: &v1.ContainerRestartRuleOnExitCodes{Operator: v1.ContainerRestartRuleOnExitCodesOpIn, Values: []int32{42}},
	}}
	s.create(pod)
	if got := s.pod.Spec.Containers[0].RestartPolicyRules; len(got) != 1 {
		t.Fatalf("the API server dropped the container's restart rules (ContainerRestartRules off?): %v", got)
	}
	p := s.poll("restarted once by its rule, then Ready", time.Second, 3*time.Minute, func(p *v1.Pod) (bool, error) {
		if p.Status.Phase == v1.PodFailed || p.Status.Phase == v1.PodSucceeded {
			return false, fmt.Errorf("pod %s", p.Status.Phase)
		}
		return s.restartCount(p) == 1 && isReady(p), nil
	})
	cs := s.status(p)
	if last := cs.LastTerminationState.Terminated; last == nil || last.ExitCode != 42 {
		t.Errorf("last termination %+v, want exit 42", last)
	}
	if c := condition(p, s.readyCond()); c == nil || c.Status != v1.ConditionTrue || c.LastTransitionTime.Time.Before(cs.State.Running.StartedAt.Time) {
		t.Errorf("%s = %+v: want True, set for the new instance (started %s)", s.readyCond(), c, cs.State.Running.StartedAt)
	}
	s.note("restarted by its rule (exit 42 under restartPolicy Never), the new instance Ready through probed")
}

// Issue 21, 3: upstream's "should have monotonically increasing restart
// count" (five restarts), timed under probed (the probe in probed.io/probes)
// and under the kubelet (the same probe in the pod spec), side by side. The
// kubelet restarts a container its own probe killed in the same pass and
// measures its back-off from the previous dead instance; after probed's
// stop it measures from the instance that just exited, so every restart
// from the second on waits out one more back-off step. The figures go in
// the summary and docs/install.md.
func testRestartCountTimingProbedAndKubelet(t *testing.T) {
	const restarts = 5
	var mu sync.Mutex
	took := map[string]string{}
	t.Cleanup(func() {
		mu.Lock()
		defer mu.Unlock()
		line := fmt.Sprintf("%d restarts: probed %s; kubelet %s", restarts, took["probed"], took["kubelet"])
		logf("restart-count timing: %s", line)
		outcome := "PASS"
		if t.Failed() {
			outcome = "FAIL"
		}
		record(result{name: "parity/restart-count-timing", outcome: outcome, notes: []string{line}})
	})
	for _, who := range []string{"probed", "kubelet"} {
		t.Run(who, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			liveness := &v1.Probe{ProbeHandler: httpGetHandler("/healthz", 8080), InitialDelaySeconds: 5, FailureThreshold: 1}
			pod := &v1.Pod{
				ObjectMeta: metav1.ObjectMeta{Name: "restart-count-" + who, Namespace: testNS},
				Spec: v1.PodSpec{
					AutomountServiceAccountToken: ptr(false),
					EnableServiceLinks:           ptr(false),
					Containers: []v1.Container{{
						Name: "liveness", Image: imgTarget, ImagePullPolicy: v1.PullNever,
						Args:  []string{"--http=:8080", "--healthz-fail-after=10s"},
						Ports: []v1.ContainerPort{{ContainerPort: 8080}},
					}},
				},
			}
			if who == "probed" {
				b, err := json.Marshal(map[string]probes{"liveness": {Liveness: liveness}})
				if err != nil {
					t.Fatal(err)
				}
				pod.Annotations = map[string]string{probespec.ProbesAnnotation: string(b)}
			} else {
				pod.Spec.Containers[0].LivenessProbe = liveness
			}
			if _, err := client.CoreV1().Pods(testNS).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() {
				err := client.CoreV1().Pods(testNS).Delete(context.Background(), pod.Name, metav1.DeleteOptions{GracePeriodSeconds: ptr(int64(0))})
				if err != nil && !apierrors.IsNotFound(err) {
					t.Log(err)
				}
			})
			p := pollPod(t, ctx, testNS, pod.Name, "the container running", podStartTimeout, func(p *v1.Pod) bool {
				cs := containerStatus(p, "liveness")
				return cs != nil && cs.State.Running != nil
			})
			began := containerStatus(p, "liveness").State.Running.StartedAt.Time
			var at []string
			last := int32(0)
			p = pollPod(t, ctx, testNS, pod.Name, fmt.Sprintf("%d restarts", restarts), 12*time.Minute, func(p *v1.Pod) bool {
				rc := containerStatus(p, "liveness").RestartCount
				if rc < last {
					t.Fatalf("restart count went from %d to %d", last, rc)
				}
				if rc != last {
					last = rc
					at = append(at, time.Since(began).Round(time.Second).String())
				}
				return rc >= restarts
			})
			total := time.Since(began).Round(time.Second)
			t.Logf("under %s: %d restarts in %v (at %s)", who, restarts, total, strings.Join(at, ", "))
			mu.Lock()
			took[who] = fmt.Sprintf("%v (restarts at %s)", total, strings.Join(at, ", "))
			mu.Unlock()
		})
	}
}
