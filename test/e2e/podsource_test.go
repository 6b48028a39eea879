//go:build e2e

package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/version"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/probed-dev/probed/pkg/probespec"
)

// podSource is the pod source TestMain deployed probed with and checked it
// chose: "kubelet" on a node whose kubelet serves the Pods API (1.37+),
// "apiserver" on an older one.
var podSource string

// podSourceKubeletMinor is the first minor whose kubelet serves the Pods API
// by default (KEP-4188, beta in 1.37).
const podSourceKubeletMinor = 37

// The tier's pod-source components: deploy/'s for a kubelet with the Pods
// API; for an older one, --pod-source=auto with the socket's directory
// mounted and deploy/'s ClusterRole whole.
const podSourceKubeletComponent = "pod-source-kubelet"

func podSourceAutoComponent() string {
	return filepath.Join(repoRoot, "test", "e2e", "testdata", "pod-source-auto")
}

// tierComponents are the components TestMain deploys probed with, for
// tests that redeploy it otherwise for a while and restore it.
var tierComponents []string

// pickPodSource reads the node's kubelet version, sets podSource and the
// components DeployProbed applies, and returns the version.
func pickPodSource(ctx context.Context) (string, error) {
	n, err := client.CoreV1().Nodes().Get(ctx, nd.Name, metav1.GetOptions{})
	if err != nil {
		return "", fmt.Errorf("the node's kubelet version: %w", err)
	}
	kv := n.Status.NodeInfo.KubeletVersion
	v, err := version.ParseGeneric(kv)
	if err != nil {
		return "", fmt.Errorf("kubelet version %q: %w", kv, err)
	}
	component := podSourceAutoComponent()
	podSource = "apiserver"
	if !v.LessThan(version.MajorMinor(1, podSourceKubeletMinor)) {
		component, podSource = podSourceKubeletComponent, "kubelet"
	}
	tierComponents = append(nd.DeployComponents(), component)
	nd.SetDeployComponents(tierComponents...)
	return kv, nil
}

// podSourceInfo matches probed_pod_source_info's series of source at 1.
func podSourceInfo(source string) *regexp.Regexp {
	return regexp.MustCompile(`(?m)^probed_pod_source_info\{[^}]*source="` + regexp.QuoteMeta(source) + `"[^}]*\} 1$`)
}

// checkPodSource waits until probed's metrics say it reads its pods from
// want, and fails naming what probed said otherwise: its metric and its
// "Pod source" log line.
func checkPodSource(ctx context.Context, want string) error {
	var body []byte
	err := wait.PollUntilContextTimeout(ctx, time.Second, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		b, err := nd.ProbedGet(ctx, "/metrics")
		if err != nil {
			return false, nil
		}
		body = b
		return podSourceInfo(want).Match(b), nil
	})
	if err == nil {
		return nil
	}
	var series []string
	for _, l := range strings.Split(string(body), "\n") {
		if strings.HasPrefix(l, "probed_pod_source") {
			series = append(series, l)
		}
	}
	return fmt.Errorf("probed's pod source is not the %s: its metrics say %q; its log: %q",
		want, series, probedLogLines(ctx, `"Pod source"`))
}

// metricLines returns probed's metric lines that start with prefix.
func metricLines(t *testing.T, prefix string) []string {
	t.Helper()
	var out []string
	err := wait.PollUntilContextTimeout(context.Background(), time.Second, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		body, err := nd.ProbedGet(ctx, "/metrics")
		if err != nil {
			return false, nil
		}
		out = nil
		for _, l := range strings.Split(string(body), "\n") {
			if strings.HasPrefix(l, prefix) {
				out = append(out, l)
			}
		}
		return true, nil
	})
	if err != nil {
		t.Fatalf("scraping %s: %v", nd.ProbedMetricsURL(), err)
	}
	return out
}

// TestPodSource: on a node whose kubelet serves the Pods API, probed reads
// its pods from there (its metric and its log say so), its service account
// may not get, list or watch pods anywhere (deploy/pod-source-kubelet took
// the rule out), and an edit of a running pod's probed.io/probes, which the
// kubelet's watch does not carry, still takes effect: probed re-lists.
func TestPodSource(t *testing.T) {
	t.Parallel()
	if podSource != "kubelet" {
		t.Skipf("probed's pod source here is the %s (a kubelet before 1.%d)", podSource, podSourceKubeletMinor)
	}
	t.Run("kubelet-without-pod-rbac", func(t *testing.T) {
		t.Parallel()
		testKubeletSourceWithoutPodRBAC(t)
	})
	t.Run("annotation-edit", func(t *testing.T) {
		t.Parallel()
		testAnnotationEditReachesProbed(t)
	})
}

func testKubeletSourceWithoutPodRBAC(t *testing.T) {
	ctx := context.Background()
	// The kubelet serves it where the harness pointed probed.
	if st, err := os.Stat(nd.KubeletPodsAPISocket()); err != nil || st.Mode()&os.ModeSocket == 0 {
		t.Errorf("the kubelet's Pods API socket %s: %v (mode %v)", nd.KubeletPodsAPISocket(), err, st)
	}
	if b, err := os.ReadFile(filepath.Join(nd.RunDir, "kubelet.log")); err != nil || !strings.Contains(string(b), `"Starting to serve the pods API"`) {
		t.Errorf("the kubelet's log does not say it serves the pods API (%v)", err)
	}
	lines := metricLines(t, "probed_pod_source")
	info := strings.Join(lines, "\n")
	if !podSourceInfo("kubelet").MatchString(info) || podSourceInfo("apiserver").MatchString(info) {
		t.Errorf("probed_pod_source_info: %q, want source=\"kubelet\" alone at 1", lines)
	}
	if w := scrape(t, "probed_pod_source_watches_total"); w < 1 {
		t.Errorf("probed_pod_source_watches_total %g, want at least 1", w)
	}
	if l := probedLogLines(ctx, `"Pod source"`); len(l) == 0 || !strings.Contains(l[len(l)-1], `source="kubelet"`) {
		t.Errorf(`probed's "Pod source" log lines: %q, want source="kubelet"`, l)
	}
	t.Logf("probed's pod source metrics: %q", lines)

	// RBAC, as the API server judges probed's service account with its groups.
	const sa = "probed"
	ns := nd.ProbedNamespace()
	review := func(ra authorizationv1.ResourceAttributes) bool {
		t.Helper()
		r, err := client.AuthorizationV1().SubjectAccessReviews().Create(ctx, &authorizationv1.SubjectAccessReview{
			Spec: authorizationv1.SubjectAccessReviewSpec{
				User:               "system:serviceaccount:" + ns + ":" + sa,
				Groups:             []string{"system:serviceaccounts", "system:serviceaccounts:" + ns, "system:authenticated"},
				ResourceAttributes: &ra,
			},
		}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return r.Status.Allowed
	}
	for _, verb := range []string{"get", "list", "watch"} {
		for _, where := range []string{"", testNS, ns} {
			if review(authorizationv1.ResourceAttributes{Verb: verb, Resource: "pods", Namespace: where}) {
				t.Errorf("probed's service account may %s pods in %q; deploy/pod-source-kubelet should have taken that away", verb, where)
			}
		}
	}
	// What it keeps: its writes of pods' status, and its Node.
	if !review(authorizationv1.ResourceAttributes{Verb: "patch", Resource: "pods", Subresource: "status", Namespace: testNS}) {
		t.Error("probed's service account may not patch pods/status: the review or the component is wrong")
	}
	if !review(authorizationv1.ResourceAttributes{Verb: "get", Resource: "nodes", Name: nd.Name}) {
		t.Error("probed's service account may not get its Node")
	}
	// And with its own token: a list of pods is refused.
	secs := int64(600)
	tr, err := client.CoreV1().ServiceAccounts(ns).CreateToken(ctx, sa, &authenticationv1.TokenRequest{
		Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: &secs}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	as, err := kubernetes.NewForConfig(nd.ControlPlane().ConfigForToken(tr.Status.Token))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := as.CoreV1().Pods(testNS).List(ctx, metav1.ListOptions{}); !apierrors.IsForbidden(err) {
		t.Errorf("a list of pods with probed's token: %v, want Forbidden", err)
	}
}

// readinessAnnotation is probed.io/probes with an exec readiness probe of
// cmd, every second, for the container app.
func readinessAnnotation(t *testing.T, cmd ...string) string {
	t.Helper()
	b, err := json.Marshal(map[string]probes{"app": {Readiness: &v1.Probe{ProbeHandler: execHandler(cmd...), PeriodSeconds: 1}}})
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// testAnnotationEditReachesProbed edits the readiness probe of a running pod
// twice, from passing to failing and back (with the approval a pods/exec
// user's edit carries, as the webhook would give it): each edit is a change
// of metadata alone, of which the kubelet's WatchPods says nothing, so it
// reaches probed through its re-list (--kubelet-pods-relist-period, 15 s by
// default), and the condition follows.
func testAnnotationEditReachesProbed(t *testing.T) {
	ctx := context.Background()
	const name = "pod-source-edit"
	pod := &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: testNS,
			Annotations: map[string]string{probespec.ProbesAnnotation: readinessAnnotation(t, "cat", "/tmp/healthy")}},
		Spec: v1.PodSpec{
			ReadinessGates:                []v1.PodReadinessGate{{ConditionType: gateCondition}},
			AutomountServiceAccountToken:  ptr(false),
			EnableServiceLinks:            ptr(false),
			TerminationGracePeriodSeconds: ptr(int64(1)),
			Containers: []v1.Container{{Name: "app", Image: imgBusybox, ImagePullPolicy: v1.PullNever,
				Command: []string{"/bin/sh", "-c", "touch /tmp/healthy; exec sleep 100000"}}},
		},
	}
	approval, err := probespec.ApproveReach(pod)
	if err != nil {
		t.Fatal(err)
	}
	pod.Annotations[probespec.ApprovedReachAnnotation] = approval
	if _, err := client.CoreV1().Pods(testNS).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = client.CoreV1().Pods(testNS).Delete(context.Background(), name, metav1.DeleteOptions{GracePeriodSeconds: ptr(int64(0))})
	})
	cond := func(want v1.ConditionStatus, reason string) func(*v1.Pod) bool {
		return func(p *v1.Pod) bool {
			c := condition(p, "ready.probed.io/app")
			return c != nil && c.Status == want && c.Reason == reason
		}
	}
	pollPod(t, ctx, testNS, name, "ready.probed.io/app True", podStartTimeout, cond(v1.ConditionTrue, "ProbeSucceeded"))

	edit := func(what string, want v1.ConditionStatus, reason string, cmd ...string) {
		t.Helper()
		p, err := client.CoreV1().Pods(testNS).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		p.Annotations[probespec.ProbesAnnotation] = readinessAnnotation(t, cmd...)
		approval, err := probespec.ApproveReach(p)
		if err != nil {
			t.Fatal(err)
		}
		b, err := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": map[string]string{
			probespec.ProbesAnnotation: p.Annotations[probespec.ProbesAnnotation], probespec.ApprovedReachAnnotation: approval}}})
		if err != nil {
			t.Fatal(err)
		}
		edited := time.Now()
		if _, err := client.CoreV1().Pods(testNS).Patch(ctx, name, types.MergePatchType, b, metav1.PatchOptions{}); err != nil {
			t.Fatalf("editing the probe (%s): %v", what, err)
		}
		// The re-list period, a probe period and a write, with room for a
		// loaded machine.
		pollPod(t, ctx, testNS, name, "ready.probed.io/app "+string(want)+" after the edit ("+what+")", 40*time.Second, cond(want, reason))
		t.Logf("edit (%s): ready.probed.io/app %s %v after the edit", what, want, time.Since(edited).Round(100*time.Millisecond))
	}
	edit("to a failing command", v1.ConditionFalse, "ProbeFailed", "cat", "/tmp/absent")
	edit("back to a passing one", v1.ConditionTrue, "ProbeSucceeded", "test", "-f", "/tmp/healthy")
}

// TestControlPlaneOutage stops the control plane (kube-apiserver,
// kube-controller-manager, kube-scheduler; etcd, the kubelet and containerd
// keep running) for outageFor while a readiness target fails and a
// liveness target fails. probed, reading its pods from the kubelet, keeps
// probing throughout (the readiness probe's runs are counted on the host);
// the liveness failure stops the container during the outage and the
// kubelet starts it again (seen on the host and in containerd's CRI); once
// the API server is back, probed writes the readiness condition False (its
// status writes back off while the API server is away, and resume); the
// target recovers and probed writes True again. The kubelet is restarted
// then, for the tests after this one (see there); the pod's restart count
// is 1, and probed itself was not restarted.
//
// Not parallel: Go runs it alone, between the other top-level tests that
// are not parallel, before the parallel ones; nothing else needs the API
// server meanwhile.
func TestControlPlaneOutage(t *testing.T) {
	const outageFor = time.Minute
	ctx := context.Background()
	o := newSharedOutage(t, "cp-outage")
	const readyName, liveName = "outage-ready", "outage-live"

	readyTmpl := o.podTemplate(map[string]string{"app": readyName})
	readyTmpl.Annotations[probespec.ProbesAnnotation] = readinessAnnotation(t, "sh", "-c", `echo >>"/shared/ran-$POD_NAME"; test ! -e /shared/unready`)
	readyTmpl.Spec.ReadinessGates = []v1.PodReadinessGate{{ConditionType: gateCondition}}
	liveTmpl := o.podTemplate(map[string]string{"app": liveName})
	// Each start of the container leaves a line on the host.
	liveTmpl.Spec.Containers[0].Command = []string{"/bin/sh", "-c", `echo >>"/shared/starts-$POD_NAME"; trap "exit 0" TERM; sleep 100000 & wait`}
	// Each liveness probe leaves one too, before it passes or fails.
	liveTmpl.Annotations[probespec.ProbesAnnotation] = func() string {
		b, err := json.Marshal(map[string]probes{"app": {Liveness: &v1.Probe{
			ProbeHandler:  execHandler("sh", "-c", `echo >>"/shared/live-$POD_NAME"; test ! -e /shared/all && test ! -e "/shared/$POD_NAME"`),
			PeriodSeconds: 2, TimeoutSeconds: 2, FailureThreshold: 1,
		}}})
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}()
	for name, tmpl := range map[string]v1.PodTemplateSpec{readyName: readyTmpl, liveName: liveTmpl} {
		p := &v1.Pod{ObjectMeta: tmpl.ObjectMeta, Spec: tmpl.Spec}
		p.Name, p.Namespace = name, testNS
		if _, err := client.CoreV1().Pods(testNS).Create(ctx, p, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			_ = client.CoreV1().Pods(testNS).Delete(context.Background(), name, metav1.DeleteOptions{GracePeriodSeconds: ptr(int64(0))})
		})
	}
	pollPod(t, ctx, testNS, readyName, "Ready through probed", podStartTimeout, func(p *v1.Pod) bool {
		return condStatus(p, "ready.probed.io/app") == v1.ConditionTrue && isReady(p)
	})
	var live []v1.Pod
	pollT(t, liveName+" running", podStartTimeout, func() bool {
		live = podsOf(t, liveName)
		return len(live) == 1 && appStatus(&live[0]) != nil && appStatus(&live[0]).State.Running != nil
	})
	lines := func(file string) int {
		b, _ := os.ReadFile(filepath.Join(o.dir, file))
		return strings.Count(string(b), "\n")
	}
	// Read from the host: the liveness probe ran, and passed (nothing fails it yet).
	pollT(t, "a liveness probe of "+liveName, time.Minute, func() bool { return lines("live-"+liveName) > 0 })
	liveBefore := appStatus(&live[0])
	_, probedBefore := probedPod(t)

	if err := nd.StopControlPlane(); err != nil {
		t.Fatalf("stopping the control plane: %v", err)
	}
	stopped := time.Now()
	up := false
	startControlPlane := func() error {
		if up {
			return nil
		}
		up = true
		sctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		return nd.StartControlPlane(sctx)
	}
	// Never leave the control plane down for the tests after this one.
	t.Cleanup(func() {
		if err := startControlPlane(); err != nil {
			t.Errorf("starting the control plane again: %v", err)
		}
	})
	t.Logf("control plane stopped; the readiness target fails and the liveness target fails, for %v", outageFor)
	o.set("unready", true)
	o.set(liveName, true)
	flipped := time.Now()
	ranAtFlip := lines("ran-" + readyName)

	// During the outage, from the host and containerd alone.
	var killedAfter time.Duration
	for time.Since(stopped) < outageFor {
		if killedAfter == 0 && lines("starts-"+liveName) >= 2 {
			killedAfter = time.Since(flipped)
			// The new container passes: one kill, not a crash loop.
			o.set(liveName, false)
		}
		time.Sleep(500 * time.Millisecond)
	}
	ranDuring := lines("ran-"+readyName) - ranAtFlip
	attempts := criAttempts(t, liveName)

	if err := startControlPlane(); err != nil {
		t.Fatalf("starting the control plane again: %v", err)
	}
	back := time.Now()
	t.Logf("control plane back %v after it stopped", back.Sub(stopped).Round(100*time.Millisecond))

	// Probing went on: a probe a second, give or take a loaded machine.
	if least := int(outageFor/time.Second) / 2; ranDuring < least {
		t.Errorf("the readiness probe ran %d times during the %v outage (%d before it), want at least %d", ranDuring, outageFor, ranAtFlip, least)
	}
	if killedAfter == 0 {
		t.Errorf("the liveness target was not restarted during the outage (%d starts on the host; containerd's attempts %v)", lines("starts-"+liveName), attempts)
	} else if !containsAttempt(attempts, 1, true) {
		t.Errorf("containerd has no running attempt 1 of %s after the outage: %v", liveName, attempts)
	}
	t.Logf("during the outage: the readiness probe ran %d times; the liveness target started again %v after its probe began failing; containerd's attempts %v",
		ranDuring, killedAfter.Round(100*time.Millisecond), attempts)

	// Back: probed writes what it found. (The pod's Ready follows once the
	// kubelet's own watch of the API server is back: the kubelet's
	// business, not waited for here.)
	pollPod(t, ctx, testNS, readyName, "ready.probed.io/app False after the outage", time.Minute, func(p *v1.Pod) bool {
		c := condition(p, "ready.probed.io/app")
		return c != nil && c.Status == v1.ConditionFalse && c.Reason == "ProbeFailed"
	})
	t.Logf("ready.probed.io/app False %v after the API server was back", time.Since(back).Round(100*time.Millisecond))
	// And goes on: the target recovers, the condition follows.
	o.set("unready", false)
	pollPod(t, ctx, testNS, readyName, "ready.probed.io/app True again", time.Minute, func(p *v1.Pod) bool {
		return condStatus(p, "ready.probed.io/app") == v1.ConditionTrue
	})
	// The kubelet's own watches of the API server back off for up to a
	// minute after an outage this long (client-go's reflector: 30 s, with
	// as much jitter again; seen: a pod created 53 s after the API server
	// was back reached the kubelet only then), and no pod would start
	// meanwhile. A real node's kubelet takes as long; the tests after this
	// one should not, so the kubelet is restarted, with fresh watches.
	restarted := time.Now()
	if err := nd.RestartKubelet(); err != nil {
		t.Fatal(err)
	}
	pollT(t, "the restarted kubelet's node status", 2*time.Minute, func() bool {
		n, err := client.CoreV1().Nodes().Get(ctx, nd.Name, metav1.GetOptions{})
		if err != nil {
			return false
		}
		for _, c := range n.Status.Conditions {
			if c.Type == v1.NodeReady && c.Status == v1.ConditionTrue && c.LastHeartbeatTime.Time.After(restarted.Truncate(time.Second)) {
				return true
			}
		}
		return false
	})
	// The kubelet's statuses, which the restarted kubelet writes at once.
	pollT(t, liveName+"'s restart count 1", time.Minute, func() bool {
		p := podsOf(t, liveName)
		if len(p) != 1 || appStatus(&p[0]) == nil {
			return false
		}
		cs := appStatus(&p[0])
		if cs.RestartCount > 1 {
			t.Fatalf("%s restarted %d times, want 1", liveName, cs.RestartCount)
		}
		return cs.RestartCount == 1 && cs.State.Running != nil && cs.ContainerID != liveBefore.ContainerID
	})

	if _, after := probedPod(t); after.ContainerID != probedBefore.ContainerID || after.RestartCount != probedBefore.RestartCount {
		t.Errorf("probed restarted across the outage (%s x%d -> %s x%d)", probedBefore.ContainerID, probedBefore.RestartCount, after.ContainerID, after.RestartCount)
	}
	if kills := eventsTotal(probedEventsFor(t, liveName, "Killing")); kills != 1 {
		t.Logf("probed's Killing events for %s after the outage: %d (events made while the API server was down may be lost)", liveName, kills)
	}
}

// containerAttempt is one of a pod's containers as containerd's CRI lists it.
type containerAttempt struct {
	Attempt uint32
	Running bool
}

func (a containerAttempt) String() string {
	if a.Running {
		return "#" + strconv.Itoa(int(a.Attempt)) + " running"
	}
	return "#" + strconv.Itoa(int(a.Attempt)) + " exited"
}

// criAttempts lists the app containers of testNS's pod name in the node's
// containerd, through the CRI, as the kubelet sees them: no API server.
func criAttempts(t *testing.T, name string) []containerAttempt {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	resp, err := nd.Containerd().CRI().ListContainers(ctx, &runtimeapi.ListContainersRequest{Filter: &runtimeapi.ContainerFilter{
		LabelSelector: map[string]string{"io.kubernetes.pod.name": name, "io.kubernetes.pod.namespace": testNS, "io.kubernetes.container.name": "app"}}})
	if err != nil {
		t.Errorf("CRI ListContainers: %v", err)
		return nil
	}
	var out []containerAttempt
	for _, c := range resp.Containers {
		out = append(out, containerAttempt{Attempt: c.GetMetadata().GetAttempt(), Running: c.State == runtimeapi.ContainerState_CONTAINER_RUNNING})
	}
	return out
}

func containsAttempt(as []containerAttempt, attempt uint32, running bool) bool {
	for _, a := range as {
		if a.Attempt == attempt && a.Running == running {
			return true
		}
	}
	return false
}
