//go:build e2e

package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/wait"
)

const (
	imgBusybox = imgBusyboxName
	imgTarget  = imgTargetName

	gateCondition = "probed.io/ready"
	// podStartTimeout bounds how long a pod may take to run its containers,
	// once it is created (after its start slot).
	podStartTimeout = 3 * time.Minute
	// startSlotHold bounds how long a pod holds its start slot if its
	// container never runs.
	startSlotHold = 90 * time.Second
	// eventTimeout bounds how long an expected event may lag its cause.
	eventTimeout = 30 * time.Second
)

// placement says where the probed container sits in the pod.
type placement int

const (
	// regular: the probed container is the pod's only container.
	regular placement = iota
	// sidecar: the probed container is a restartable init container
	// (restartPolicy Always) next to a main container that just waits.
	sidecar
)

func (p placement) String() string {
	if p == sidecar {
		return "sidecar"
	}
	return "container"
}

// probes is one container's entry in the probed.io/probes annotation.
type probes struct {
	Liveness  *v1.Probe `json:"livenessProbe,omitempty"`
	Readiness *v1.Probe `json:"readinessProbe,omitempty"`
	Startup   *v1.Probe `json:"startupProbe,omitempty"`
}

// workload is what the probed container runs.
type workload struct {
	image   string
	command []string
	args    []string
	ports   []int32
}

// shell runs script with busybox's sh, as the upstream busybox pods do.
func shell(script string) workload {
	return workload{image: imgBusybox, command: []string{"/bin/sh", "-c", script}}
}

// target runs probe-target with flags, declaring ports.
func target(ports []int32, flags ...string) workload {
	return workload{image: imgTarget, args: flags, ports: ports}
}

func execHandler(cmd ...string) v1.ProbeHandler {
	return v1.ProbeHandler{Exec: &v1.ExecAction{Command: cmd}}
}

func httpGetHandler(path string, port int) v1.ProbeHandler {
	return v1.ProbeHandler{HTTPGet: &v1.HTTPGetAction{Path: path, Port: intstr.FromInt32(int32(port))}}
}

func tcpSocketHandler(port int) v1.ProbeHandler {
	return v1.ProbeHandler{TCPSocket: &v1.TCPSocketAction{Port: intstr.FromInt32(int32(port))}}
}

func grpcHandler(port int32) v1.ProbeHandler {
	return v1.ProbeHandler{GRPC: &v1.GRPCAction{Port: port}}
}

func grpcTLSHandler(port int32) v1.ProbeHandler {
	return v1.ProbeHandler{GRPC: &v1.GRPCAction{Port: port, Mode: ptr(v1.GRPCProbeModeTLS)}}
}

func httpGetProtocolHandler(path string, port int, protocol v1.HTTPProtocol) v1.ProbeHandler {
	h := httpGetHandler(path, port)
	h.HTTPGet.Protocol = &protocol
	return h
}

func ptr[T any](v T) *T { return &v }

// sc is one running scenario: its test, pod and what it has seen.
type sc struct {
	t     *testing.T
	ctx   context.Context
	name  string
	place placement
	group string // the summary's group: the placement, or "demo"
	start time.Time

	// ns, podName and container name the pod and the probed container in it.
	ns        string
	podName   string
	container string
	pod       *v1.Pod // as created
	owned     bool    // the scenario created the pod, and deletes it
	slotHeld  bool    // it holds a start slot (under mu)

	mu    sync.Mutex
	notes []string
	// seen are the probed events found; finish checks kubectl describe shows them.
	seen []v1.Event
	// allowed are event reasons this scenario expects from probed beyond
	// Unhealthy, ProbeWarning and Killing.
	allowed []string
}

func newSC(t *testing.T, name string, place placement) *sc {
	s := &sc{t: t, ctx: context.Background(), name: name, place: place, start: time.Now(), ns: testNS, group: place.String()}
	slug := name
	if i := strings.IndexByte(slug, '-'); i > 0 {
		slug = slug[i+1:] // drop the number
	}
	s.podName = slug
	if place == sidecar {
		s.podName += "-sc"
	}
	t.Cleanup(s.finish)
	return s
}

// note adds a fact to the scenario's line in the summary, and logs it.
func (s *sc) note(format string, args ...any) {
	msg := fmt.Sprintf(format, args...)
	s.t.Log(msg)
	s.mu.Lock()
	s.notes = append(s.notes, msg)
	s.mu.Unlock()
}

func (s *sc) elapsed() time.Duration { return time.Since(s.start).Round(100 * time.Millisecond) }

// finish checks kubectl describe, dumps diagnostics on failure, records the
// result, and deletes the pod.
func (s *sc) finish() {
	if s.pod != nil && !s.t.Failed() {
		// The scenarios' probes are all valid, and probed has nothing to say
		// about them beyond the kubelet's own event reasons.
		for _, e := range s.probedEvents() {
			switch {
			case e.Reason == "Unhealthy", e.Reason == "ProbeWarning", e.Reason == "Killing":
			case slices.Contains(s.allowed, e.Reason):
			// A sidecar scenario declares the sidecar's startup probe in
			// probed.io/probes, which probed runs and warns about once.
			case s.place == sidecar && e.Reason == "SidecarStartupProbe":
			default:
				s.t.Errorf("unexpected event from probed: %s %s x%d: %q", e.Type, e.Reason, e.Count, e.Message)
			}
		}
		if len(s.seen) > 0 {
			s.expectDescribed()
		}
	}
	s.releaseStartSlot()
	if s.pod != nil && s.t.Failed() {
		s.dumpDiagnostics()
	}
	outcome := "PASS"
	if s.t.Failed() {
		outcome = "FAIL"
	} else if s.t.Skipped() {
		outcome = "SKIP"
	}
	d := time.Since(s.start)
	s.t.Logf("scenario %s/%s %s in %v", s.group, s.name, outcome, d.Round(100*time.Millisecond))
	record(result{name: s.group + "/" + s.name, outcome: outcome, duration: d, notes: s.notes})
	if s.owned {
		err := client.CoreV1().Pods(s.ns).Delete(context.Background(), s.podName, metav1.DeleteOptions{GracePeriodSeconds: ptr(int64(0))})
		if err != nil && !apierrors.IsNotFound(err) {
			s.t.Logf("deleting pod %s: %v", s.podName, err)
		}
	}
}

// newPod builds the scenario's pod: the probed container (named container),
// the probes in probed.io/probes, and the probed.io/ready readiness gate.
func (s *sc) newPod(container string, w workload, p probes) *v1.Pod {
	s.container = container
	annotation, err := json.Marshal(map[string]probes{container: p})
	if err != nil {
		s.t.Fatal(err)
	}
	c := v1.Container{
		Name:            container,
		Image:           w.image,
		ImagePullPolicy: v1.PullNever,
		Command:         w.command,
		Args:            w.args,
	}
	for _, port := range w.ports {
		c.Ports = append(c.Ports, v1.ContainerPort{ContainerPort: port, Protocol: v1.ProtocolTCP})
	}
	pod := &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Name:        s.podName,
			Namespace:   s.ns,
			Labels:      map[string]string{"e2e.probed.io/scenario": s.name, "e2e.probed.io/placement": s.place.String()},
			Annotations: map[string]string{"probed.io/probes": string(annotation)},
		},
		Spec: v1.PodSpec{
			ReadinessGates:               []v1.PodReadinessGate{{ConditionType: gateCondition}},
			AutomountServiceAccountToken: ptr(false),
			EnableServiceLinks:           ptr(false),
		},
	}
	switch s.place {
	case regular:
		pod.Spec.Containers = []v1.Container{c}
	case sidecar:
		c.RestartPolicy = ptr(v1.ContainerRestartPolicyAlways)
		pod.Spec.InitContainers = []v1.Container{c}
		// The main container only waits; it exits at once on SIGTERM, as
		// agnhost pause does upstream.
		pod.Spec.Containers = []v1.Container{{
			Name: "main", Image: imgTarget, ImagePullPolicy: v1.PullNever, Args: []string{"--http="},
		}}
	}
	return pod
}

func (s *sc) create(pod *v1.Pod) {
	s.t.Helper()
	s.takeStartSlot()
	created, err := client.CoreV1().Pods(s.ns).Create(s.ctx, pod, metav1.CreateOptions{})
	if err != nil {
		s.releaseStartSlot()
		s.t.Fatalf("creating pod %s: %v", pod.Name, err)
	}
	s.pod, s.owned = created, true
	s.t.Logf("created pod %s/%s (uid %s), probes %s", s.ns, created.Name, created.UID, created.Annotations["probed.io/probes"])
	go s.holdStartSlot()
}

// takeStartSlot waits at the start gate, and starts the scenario's clock
// once admitted.
func (s *sc) takeStartSlot() {
	a, err := startGate.enter(s.ctx)
	if err != nil {
		s.t.Fatalf("waiting at the start gate: %v", err)
	}
	s.mu.Lock()
	s.slotHeld = true
	s.mu.Unlock()
	if a.waited > time.Second || a.slowed {
		s.t.Log(a)
	}
	s.start = time.Now()
}

// holdStartSlot gives the slot back once the scenario's container has run
// (or ended), the pod is gone, or startSlotHold has passed.
func (s *sc) holdStartSlot() {
	defer s.releaseStartSlot()
	_ = wait.PollUntilContextTimeout(s.ctx, 500*time.Millisecond, startSlotHold, true, func(ctx context.Context) (bool, error) {
		p, err := client.CoreV1().Pods(s.ns).Get(ctx, s.podName, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return true, nil
		}
		if err != nil {
			return false, nil
		}
		return p.Status.Phase == v1.PodSucceeded || p.Status.Phase == v1.PodFailed || s.containerHasRun(p), nil
	})
}

func (s *sc) releaseStartSlot() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.slotHeld {
		s.slotHeld = false
		startGate.leave()
	}
}

func (s *sc) get() *v1.Pod {
	s.t.Helper()
	var p *v1.Pod
	// Retry transient errors: the API server is shared by every scenario.
	err := wait.PollUntilContextTimeout(s.ctx, 200*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		var err error
		p, err = client.CoreV1().Pods(s.ns).Get(ctx, s.podName, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return false, err
		}
		return err == nil, nil
	})
	if err != nil {
		s.t.Fatalf("getting pod %s: %v", s.podName, err)
	}
	return p
}

// status is the probed container's status in p, or nil.
func (s *sc) status(p *v1.Pod) *v1.ContainerStatus { return containerStatus(p, s.container) }

// lastTermination waits until the container's status has a last termination
// state: the kubelet can report a restart a status write before it (a busy
// 1.35 node did). p is the pod the restart was seen in.
func (s *sc) lastTermination(p *v1.Pod) *v1.ContainerStateTerminated {
	s.t.Helper()
	if cs := s.status(p); cs != nil && cs.LastTerminationState.Terminated != nil {
		return cs.LastTerminationState.Terminated
	}
	p = s.poll("the last termination state of "+s.container, time.Second, 30*time.Second, func(p *v1.Pod) (bool, error) {
		cs := s.status(p)
		return cs != nil && cs.LastTerminationState.Terminated != nil, nil
	})
	return s.status(p).LastTerminationState.Terminated
}

func (s *sc) restartCount(p *v1.Pod) int32 {
	if cs := s.status(p); cs != nil {
		return cs.RestartCount
	}
	return 0
}

func condition(p *v1.Pod, t string) *v1.PodCondition {
	for i := range p.Status.Conditions {
		if string(p.Status.Conditions[i].Type) == t {
			return &p.Status.Conditions[i]
		}
	}
	return nil
}

func condStatus(p *v1.Pod, t string) v1.ConditionStatus {
	if c := condition(p, t); c != nil {
		return c.Status
	}
	return "<absent>"
}

func isReady(p *v1.Pod) bool { return condStatus(p, string(v1.PodReady)) == v1.ConditionTrue }

func (s *sc) readyCond() string   { return "ready.probed.io/" + s.container }
func (s *sc) startedCond() string { return "started.probed.io/" + s.container }

// poll runs cond every interval until it returns true, fails, or timeout passes.
func (s *sc) poll(what string, interval, timeout time.Duration, cond func(p *v1.Pod) (bool, error)) *v1.Pod {
	s.t.Helper()
	var last *v1.Pod
	err := wait.PollUntilContextTimeout(s.ctx, interval, timeout, true, func(ctx context.Context) (bool, error) {
		last = s.get()
		return cond(last)
	})
	if err != nil {
		if wait.Interrupted(err) {
			s.t.Fatalf("%v: timed out after %v waiting for %s; pod: %s", s.elapsed(), timeout, what, summarize(last))
		}
		s.t.Fatalf("%v: %s: %v; pod: %s", s.elapsed(), what, err, summarize(last))
	}
	return last
}

// observe checks every interval for window that violated returns nil; an
// error from it fails the scenario at once.
func (s *sc) observe(what string, interval, window time.Duration, violated func(p *v1.Pod) error) *v1.Pod {
	s.t.Helper()
	var last *v1.Pod
	var bad error
	err := wait.PollUntilContextTimeout(s.ctx, interval, window, true, func(ctx context.Context) (bool, error) {
		last = s.get()
		bad = violated(last)
		return bad != nil, nil
	})
	if bad != nil {
		s.t.Fatalf("%v: %s stopped holding: %v; pod: %s", s.elapsed(), what, bad, summarize(last))
	}
	if err != nil && !wait.Interrupted(err) {
		s.t.Fatal(err)
	}
	return last
}

// waitContainerStarted waits until the probed container is running or has
// run: upstream's "container not waiting".
func (s *sc) waitContainerStarted() *v1.Pod {
	s.t.Helper()
	p := s.poll("the container to run", 500*time.Millisecond, podStartTimeout, func(p *v1.Pod) (bool, error) {
		return s.containerHasRun(p), nil
	})
	s.t.Logf("%v: container %s running", s.elapsed(), s.container)
	return p
}

// containerHasRun reports whether the scenario's container in p is running
// or has ended: upstream's "container not waiting".
func (s *sc) containerHasRun(p *v1.Pod) bool { return hasRun(s.status(p)) }

func hasRun(cs *v1.ContainerStatus) bool {
	return cs != nil && (cs.State.Running != nil || cs.State.Terminated != nil)
}

// expectRestarts waits until the container's restart count has risen by n,
// failing if it ever goes down.
func (s *sc) expectRestarts(initial, n int32, timeout time.Duration) *v1.Pod {
	s.t.Helper()
	last := initial
	began := time.Now()
	var times []string
	p := s.poll(fmt.Sprintf("%d restart(s) of %s", n, s.container), time.Second, timeout, func(p *v1.Pod) (bool, error) {
		rc := s.restartCount(p)
		if rc < last {
			return false, fmt.Errorf("restart count must rise monotonically: went from %d to %d", last, rc)
		}
		if rc != last {
			at := time.Since(began).Round(time.Second)
			s.t.Logf("%v: restart count of %s is now %d (%v after the container ran)", s.elapsed(), s.container, rc, at)
			times = append(times, at.String())
			last = rc
		}
		return rc-initial >= n, nil
	})
	s.note("restarts at %s", strings.Join(times, ", "))
	return p
}

// expectNoRestarts watches the restart count for window.
func (s *sc) expectNoRestarts(initial int32, window time.Duration) *v1.Pod {
	s.t.Helper()
	p := s.observe("no restarts", 2*time.Second, window, func(p *v1.Pod) error {
		if rc := s.restartCount(p); rc != initial {
			return fmt.Errorf("restart count went from %d to %d", initial, rc)
		}
		return nil
	})
	s.note("not restarted in %v", window)
	return p
}

// runLivenessTest is upstream's RunLivenessTest: create the pod, wait for the
// container to run, then expect exactly "restarts" restarts (at least that
// many within timeout, or none for the observation window).
func (s *sc) runLivenessTest(pod *v1.Pod, restarts int32, timeout time.Duration) *v1.Pod {
	s.t.Helper()
	s.create(pod)
	p := s.waitContainerStarted()
	initial := s.restartCount(p)
	if restarts == 0 {
		p = s.expectNoRestarts(initial, observeLiveness)
		s.expectNoProbedEvent("Killing", "")
		return p
	}
	return s.expectRestarts(initial, restarts, timeout)
}

// ---- events ----

// probedEvents lists the pod's events from probed.
func (s *sc) events() []v1.Event {
	s.t.Helper()
	var list *v1.EventList
	err := wait.PollUntilContextTimeout(s.ctx, 200*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		var err error
		list, err = client.CoreV1().Events(s.ns).List(ctx, metav1.ListOptions{FieldSelector: "involvedObject.uid=" + string(s.pod.UID)})
		return err == nil, nil
	})
	if err != nil {
		s.t.Fatalf("listing events: %v", err)
	}
	return list.Items
}

func (s *sc) probedEvents() []v1.Event {
	var out []v1.Event
	for _, e := range s.events() {
		if e.Source.Component == "probed" || e.ReportingController == "probed" {
			out = append(out, e)
		}
	}
	return out
}

func (s *sc) fieldPath() string {
	if s.place == sidecar {
		return "spec.initContainers{" + s.container + "}"
	}
	return "spec.containers{" + s.container + "}"
}

// expectEvent waits for a probed event with the type and reason whose message
// contains msg, and checks how it is addressed: the pod, the container's field
// path, and source probed on this node. It returns the event.
func (s *sc) expectEvent(typ, reason, msg string) v1.Event {
	s.t.Helper()
	var found *v1.Event
	err := wait.PollUntilContextTimeout(s.ctx, 500*time.Millisecond, eventTimeout, true, func(ctx context.Context) (bool, error) {
		for _, e := range s.probedEvents() {
			if e.Reason == reason && strings.Contains(e.Message, msg) {
				found = &e
				return true, nil
			}
		}
		return false, nil
	})
	if err != nil {
		s.t.Fatalf("%v: no %s event %q from probed; events: %s", s.elapsed(), reason, msg, formatEvents(s.events()))
	}
	e := *found
	var problems []string
	if e.Type != typ {
		problems = append(problems, fmt.Sprintf("type %q, want %q", e.Type, typ))
	}
	if e.InvolvedObject.Kind != "Pod" || e.InvolvedObject.Name != s.podName || e.InvolvedObject.Namespace != s.ns {
		problems = append(problems, fmt.Sprintf("involvedObject %s %s/%s", e.InvolvedObject.Kind, e.InvolvedObject.Namespace, e.InvolvedObject.Name))
	}
	if e.InvolvedObject.FieldPath != s.fieldPath() {
		problems = append(problems, fmt.Sprintf("fieldPath %q, want %q", e.InvolvedObject.FieldPath, s.fieldPath()))
	}
	if e.Source.Component != "probed" || e.Source.Host != nd.Name {
		problems = append(problems, fmt.Sprintf("source %+v, want component probed on host %q", e.Source, nd.Name))
	}
	if len(problems) > 0 {
		s.t.Errorf("%s event %q: %s", reason, e.Message, strings.Join(problems, "; "))
	}
	s.t.Logf("%v: event %s %s x%d from %s: %q", s.elapsed(), e.Type, e.Reason, e.Count, e.Source.Component, e.Message)
	s.mu.Lock()
	s.seen = append(s.seen, e)
	s.mu.Unlock()
	return e
}

// expectNoProbedEvent fails if probed emitted an event with reason whose
// message contains msg.
func (s *sc) expectNoProbedEvent(reason, msg string) {
	s.t.Helper()
	for _, e := range s.probedEvents() {
		if e.Reason == reason && strings.Contains(e.Message, msg) {
			s.t.Errorf("unexpected event %s %s x%d: %q", e.Type, e.Reason, e.Count, e.Message)
		}
	}
}

// eventCount sums the counts of probed's events with reason and msg: identical
// events are aggregated into one with a count.
func (s *sc) eventCount(reason, msg string) int32 {
	var n int32
	for _, e := range s.probedEvents() {
		if e.Reason == reason && strings.Contains(e.Message, msg) {
			n += max(e.Count, 1)
		}
	}
	return n
}

// expectDescribed runs kubectl describe pod and checks that its Events table
// shows each event found, from probed, as the kubelet's would look.
func (s *sc) expectDescribed() {
	s.t.Helper()
	out, err := kubectl(s.ctx, "describe", "pod", "-n", s.ns, s.podName)
	if err != nil {
		s.t.Errorf("kubectl describe pod: %v\n%s", err, out)
		return
	}
	i := strings.Index(out, "\nEvents:")
	if i < 0 {
		s.t.Errorf("kubectl describe pod shows no Events section:\n%s", out)
		return
	}
	table := out[i:]
	for _, e := range s.seen {
		first := strings.SplitN(strings.TrimSpace(e.Message), "\n", 2)[0]
		row := regexp.MustCompile(`(?m)^\s+` + regexp.QuoteMeta(e.Type) + `\s+` + regexp.QuoteMeta(e.Reason) +
			`\s+.*\sprobed(,\s*\S+)?\s+` + regexp.QuoteMeta(first))
		if !row.MatchString(table) {
			s.t.Errorf("kubectl describe pod does not show %s %s from probed %q:%s", e.Type, e.Reason, first, table)
		}
	}
	s.t.Logf("kubectl describe pod %s:%s", s.podName, table)
}

func kubectl(ctx context.Context, args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "kubectl", append([]string{"--kubeconfig", nd.KubeconfigPath}, args...)...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	return out.String(), err
}

// ---- diagnostics ----

func summarize(p *v1.Pod) string {
	if p == nil {
		return "<none>"
	}
	var b strings.Builder
	fmt.Fprintf(&b, "phase=%s deleting=%v", p.Status.Phase, p.DeletionTimestamp != nil)
	for _, c := range p.Status.Conditions {
		fmt.Fprintf(&b, " %s=%s", c.Type, c.Status)
		if c.Reason != "" {
			fmt.Fprintf(&b, "(%s)", c.Reason)
		}
	}
	for _, cs := range append(append([]v1.ContainerStatus{}, p.Status.InitContainerStatuses...), p.Status.ContainerStatuses...) {
		state := "waiting"
		switch {
		case cs.State.Running != nil:
			state = "running since " + cs.State.Running.StartedAt.Format("15:04:05")
		case cs.State.Terminated != nil:
			state = fmt.Sprintf("terminated(%d %s)", cs.State.Terminated.ExitCode, cs.State.Terminated.Reason)
		case cs.State.Waiting != nil:
			state = "waiting(" + cs.State.Waiting.Reason + ")"
		}
		fmt.Fprintf(&b, " [%s %s restarts=%d ready=%v]", cs.Name, state, cs.RestartCount, cs.Ready)
	}
	return b.String()
}

func formatEvents(evs []v1.Event) string {
	var b strings.Builder
	for _, e := range evs {
		fmt.Fprintf(&b, "\n  %s %s %s x%d (%s, %s): %q", e.LastTimestamp.Format("15:04:05"), e.Type, e.Reason, e.Count,
			e.Source.Component, e.InvolvedObject.FieldPath, strings.TrimSpace(e.Message))
	}
	return b.String()
}

func (s *sc) dumpDiagnostics() {
	p, err := client.CoreV1().Pods(s.ns).Get(context.Background(), s.podName, metav1.GetOptions{})
	if err == nil {
		s.t.Logf("pod at failure: %s", summarize(p))
		for _, c := range p.Status.Conditions {
			s.t.Logf("  condition %s=%s reason=%s since %s: %s", c.Type, c.Status, c.Reason, c.LastTransitionTime.Format("15:04:05"), c.Message)
		}
	}
	s.t.Logf("events:%s", formatEvents(s.events()))
	s.t.Logf("machine at failure: %s", machineLoad())
	lines := probedLogLines(context.Background(), s.podName)
	if len(lines) > 80 {
		lines = lines[len(lines)-80:]
	}
	s.t.Logf("probed log lines about %s (last %d):\n%s", s.podName, len(lines), strings.Join(lines, "\n"))
}

// machineLoad reads the load averages and the CPU pressure (PSI), so that a
// failure from a starved machine shows as one.
func machineLoad() string {
	var parts []string
	if b, err := os.ReadFile("/proc/loadavg"); err == nil {
		if f := strings.Fields(string(b)); len(f) >= 3 {
			parts = append(parts, "load average "+strings.Join(f[:3], " "))
		}
	}
	if b, err := os.ReadFile("/proc/pressure/cpu"); err == nil {
		if line, _, _ := strings.Cut(string(b), "\n"); strings.HasPrefix(line, "some ") {
			f := strings.Fields(line)
			parts = append(parts, "CPU pressure (% of time some task waited) "+strings.Join(f[1:min(len(f), 4)], " "))
		}
	}
	if len(parts) == 0 {
		return "unknown"
	}
	return strings.Join(parts, "; ")
}

// probedLog returns the DaemonSet pod's log: through the API (kubectl logs),
// or else from the kubelet's pod log dir under the node's run dir.
func probedLog(ctx context.Context) (string, error) {
	name, err := nd.ProbedPodName(ctx)
	if err == nil {
		ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		defer cancel()
		rc, err := client.CoreV1().Pods("probed-system").GetLogs(name, &v1.PodLogOptions{Container: "probed"}).Stream(ctx)
		if err == nil {
			defer rc.Close()
			b, err := io.ReadAll(rc)
			if err == nil {
				return string(b), nil
			}
		}
	}
	var files []string
	_ = filepath.WalkDir(nd.RunDir, func(path string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() && strings.HasSuffix(path, ".log") && strings.Contains(path, "probed-system_probed-") {
			files = append(files, path)
		}
		return nil
	})
	if len(files) == 0 {
		return "", errors.Join(err, errors.New("no probed log file under "+nd.RunDir))
	}
	var b strings.Builder
	for _, f := range files {
		data, _ := os.ReadFile(f)
		b.Write(data)
	}
	return b.String(), nil
}

func probedLogLines(ctx context.Context, contains string) []string {
	log, err := probedLog(ctx)
	if err != nil {
		return []string{"(probed log unavailable: " + err.Error() + ")"}
	}
	var out []string
	for _, l := range strings.Split(log, "\n") {
		if contains == "" || strings.Contains(l, contains) {
			out = append(out, l)
		}
	}
	return out
}

func dumpProbedLog(ctx context.Context, n int) {
	lines := probedLogLines(ctx, "")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	logf("probed log (last %d lines):\n%s", len(lines), strings.Join(lines, "\n"))
}
