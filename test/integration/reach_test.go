//go:build integration

package integration

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/probed-dev/probed/pkg/probespec"
)

// reachUsers are the users of the reach tests, each with a Role of its
// own in the test's namespace and reached by impersonation, so that the
// real RBAC authorizer, the policies' CEL authorizer and the webhook's
// SubjectAccessReviews judge them.
type reachUsers struct {
	// patcher may patch and update pods, and nothing more: no pods/exec.
	patcher kubernetes.Interface
	// execer may also create pods/exec (kubectl exec).
	execer kubernetes.Interface
	// statusWriter may patch pods/status, as a controller that writes
	// conditions does.
	statusWriter kubernetes.Interface
	// binder may create pods/binding, as a scheduler does.
	binder kubernetes.Interface
}

func newReachUsers(t *testing.T, ns string) reachUsers {
	t.Helper()
	read := rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"pods"}, Verbs: []string{"get", "list", "watch"}}
	patch := rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"pods"}, Verbs: []string{"patch", "update"}}
	roles := map[string][]rbacv1.PolicyRule{
		"patcher":       {read, patch},
		"execer":        {read, patch, {APIGroups: []string{""}, Resources: []string{"pods/exec"}, Verbs: []string{"create"}}},
		"status-writer": {read, {APIGroups: []string{""}, Resources: []string{"pods/status"}, Verbs: []string{"patch", "update"}}},
		"binder":        {read, {APIGroups: []string{""}, Resources: []string{"pods/binding"}, Verbs: []string{"create"}}},
	}
	ctx := context.Background()
	clients := map[string]kubernetes.Interface{}
	for user, rules := range roles {
		name := "reach-" + user
		if _, err := client.RbacV1().Roles(ns).Create(ctx, &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: name}, Rules: rules}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		rb := &rbacv1.RoleBinding{
			ObjectMeta: metav1.ObjectMeta{Name: name},
			RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: name},
			Subjects:   []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.UserKind, Name: user}},
		}
		if _, err := client.RbacV1().RoleBindings(ns).Create(ctx, rb, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		cfg := cp.RESTConfig()
		cfg.Impersonate = rest.ImpersonationConfig{UserName: user}
		c, err := kubernetes.NewForConfig(cfg)
		if err != nil {
			t.Fatal(err)
		}
		clients[user] = c
	}
	return reachUsers{patcher: clients["patcher"], execer: clients["execer"], statusWriter: clients["status-writer"], binder: clients["binder"]}
}

// setAnnotations merge-patches a pod's annotations as c (nil values
// remove), as `kubectl annotate` does; subresource "status" patches
// through pods/status.
func setAnnotations(ctx context.Context, c kubernetes.Interface, ns, pod string, annotations map[string]any, subresource ...string) error {
	b, err := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": annotations}})
	if err != nil {
		return err
	}
	_, err = c.CoreV1().Pods(ns).Patch(ctx, pod, types.MergePatchType, b, metav1.PatchOptions{}, subresource...)
	return err
}

// ranCommand reports whether a worker of pod runs an exec probe whose spec
// contains cmd and has handed it to the container runtime at least once
// (--runtime-type=none answers every exec with its error).
func ranCommand(p *probedProc, pod, cmd string) bool {
	for _, w := range p.debugProbes() {
		if w.PodName != pod || !strings.Contains(w.Spec, cmd) {
			continue
		}
		for _, h := range w.History {
			if strings.Contains(h.Error, "no container runtime configured") {
				return true
			}
		}
	}
	return false
}

// noWorkerRuns fails the test if any worker's spec contains cmd.
func noWorkerRuns(t *testing.T, p *probedProc, cmd string) {
	t.Helper()
	for _, w := range p.debugProbes() {
		if strings.Contains(w.Spec, cmd) {
			t.Errorf("worker %s/%s/%s runs %q", w.PodName, w.Container, w.ProbeType, w.Spec)
		}
	}
}

func execSpec(cmd ...string) map[string]any {
	return map[string]any{"exec": map[string]any{"command": cmd}, "periodSeconds": 1}
}

// TestProbeEditNeedsExec (issue 20, item 1) on the real API server, with
// deploy/'s probed-probe-reach policy, deploy/webhook (the real webhook
// binary) and the real probed, for users whose only difference is
// pods/exec:
//   - a pod created with an exec probe runs it, and the webhook approves
//     its reach at creation;
//   - with the webhook up, a patch-only user's edit that would run a new
//     command is refused at admission, naming the probe; one with
//     pods/exec may make it, and it runs;
//   - with the webhook down, the same patch-only edit is admitted and
//     probed refuses it itself (an InvalidProbe naming container, probe
//     and why; nothing runs; probed_probes_unapproved_reach), and the
//     patch-only user cannot approve it or remove the approval; a pods/exec
//     user can approve a new command by hand;
//   - an edit made while probed is down is judged the same when it comes back;
//   - periods, thresholds, timeouts and ports on the pod's IP stay free for
//     the patch-only user, webhook up or down;
//   - on a pod without approval (created while the webhook was down) every
//     probe edit needs pods/exec;
//   - pods/status and bindings cannot change the annotations without it.
func TestProbeEditNeedsExec(t *testing.T) {
	port := freePort(t)
	installWebhook(t, port)
	w := startWebhook(t, port)
	w.waitReady()
	e := newEnv(t)
	ctx := e.ctx
	users := newReachUsers(t, e.ns)
	ip := loopbackIP()
	ready := startHTTPTarget(t, ip, true)
	other := startHTTPTarget(t, ip, true)

	created := probes{"app": {
		"livenessProbe":  execSpec("cat", "/tmp/healthy"),
		"readinessProbe": httpProbe(ready.Port, "/ready", nil),
	}}
	pod := e.createPod("app", mustJSON(created), true, container{name: "app"})
	want, err := probespec.ApproveReach(pod)
	if err != nil {
		t.Fatal(err)
	}
	if got := pod.Annotations[probespec.ApprovedReachAnnotation]; got != want || !strings.HasPrefix(got, "v1,app/livenessProbe=") {
		t.Errorf("created with %s=%q; want the webhook's approval %q", probespec.ApprovedReachAnnotation, got, want)
	}
	e.runPod(pod, ip, time.Minute)
	p := e.startProbed()
	e.waitCond("app", "ready.probed.io/app", v1.ConditionTrue, 20*time.Second)
	eventually(t, "the exec probe the pod was created with runs", 20*time.Second, func() bool {
		return ranCommand(p, "app", "exec [cat /tmp/healthy]")
	})

	const token = "cat /var/run/secrets/kubernetes.io/serviceaccount/token; exit 1"
	withReadiness := func(readiness map[string]any) string {
		return mustJSON(probes{"app": {"livenessProbe": execSpec("cat", "/tmp/healthy"), "readinessProbe": readiness}})
	}

	t.Run("webhook up: a patch-only user's new command is refused at admission", func(t *testing.T) {
		err := setAnnotations(ctx, users.patcher, e.ns, "app", map[string]any{probespec.ProbesAnnotation: withReadiness(execSpec("sh", "-c", token))})
		if !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), `container "app" readinessProbe: exec.command: Forbidden: changing what a probe runs`) ||
			!strings.Contains(err.Error(), `user "patcher" may not create pods/exec on pod `+e.ns+"/app") {
			t.Fatalf("patch: %v; want the webhook's 403 naming the probe", err)
		}
		if got := e.pod("app").Annotations[probespec.ProbesAnnotation]; got != mustJSON(created) {
			t.Errorf("the probes changed: %s", got)
		}
	})

	t.Run("webhook up: timing and the port on the pod's IP stay free", func(t *testing.T) {
		timed := probes{"app": {
			"livenessProbe":  map[string]any{"exec": map[string]any{"command": []string{"cat", "/tmp/healthy"}}, "periodSeconds": 2, "failureThreshold": 5, "timeoutSeconds": 3},
			"readinessProbe": httpProbe(other.Port, "/healthz", map[string]any{"failureThreshold": 4}),
		}}
		if err := setAnnotations(ctx, users.patcher, e.ns, "app", map[string]any{probespec.ProbesAnnotation: mustJSON(timed)}); err != nil {
			t.Fatal(err)
		}
		eventually(t, "the edited probes run", 20*time.Second, func() bool {
			ok := 0
			for _, w := range p.debugProbes() {
				if w.PodName == "app" && (strings.Contains(w.Spec, "timeout=3s period=2s #success=1 #failure=5") ||
					strings.Contains(w.Spec, fmt.Sprintf(":%d/healthz", other.Port))) {
					ok++
				}
			}
			return ok == 2 && other.hits.Load() > 0
		})
	})

	t.Run("webhook up: a pods/exec user's new command runs", func(t *testing.T) {
		if err := setAnnotations(ctx, users.execer, e.ns, "app", map[string]any{probespec.ProbesAnnotation: withReadiness(execSpec("cat", "/tmp/ready"))}); err != nil {
			t.Fatal(err)
		}
		got := e.pod("app")
		if want, _ := probespec.ApproveReach(got); got.Annotations[probespec.ApprovedReachAnnotation] != want {
			t.Errorf("approval %q after the pods/exec user's edit; want the webhook's %q", got.Annotations[probespec.ApprovedReachAnnotation], want)
		}
		eventually(t, "the new command runs", 20*time.Second, func() bool { return ranCommand(p, "app", "exec [cat /tmp/ready]") })
	})

	w.Shutdown()

	t.Run("webhook down: a patch-only user's new command is refused by probed", func(t *testing.T) {
		if err := setAnnotations(ctx, users.patcher, e.ns, "app", map[string]any{probespec.ProbesAnnotation: withReadiness(execSpec("sh", "-c", token))}); err != nil {
			t.Fatalf("patch: %v; the policy lets an edit of an approved pod through", err)
		}
		eventually(t, "the InvalidProbe naming the probe", 20*time.Second, func() bool {
			return e.findEvent(pod.UID, "InvalidProbe", `container "app" readinessProbe: exec.command: Forbidden: changed after the pod was created without pods/exec approval`) != nil
		})
		e.waitCond("app", "ready.probed.io/app", v1.ConditionFalse, 20*time.Second)
		if c := condition(e.pod("app"), "ready.probed.io/app"); c.Reason != "InvalidProbe" {
			t.Errorf("condition %+v; want reason InvalidProbe", c)
		}
		eventually(t, "probed_probes_unapproved_reach 1", 10*time.Second, func() bool {
			return len(p.metricLines("probed_probes_unapproved_reach 1")) == 1
		})
		noWorkerRuns(t, p, "token")
		if !ranCommand(p, "app", "exec [cat /tmp/healthy]") {
			t.Error("the pod's approved liveness probe stopped")
		}
	})

	t.Run("webhook down: a patch-only user can neither approve nor drop the approval", func(t *testing.T) {
		mine, err := probespec.ApproveReach(e.pod("app"))
		if err != nil {
			t.Fatal(err)
		}
		for what, v := range map[string]any{"approve": mine, "remove": nil, "garble": "v1"} {
			err := setAnnotations(ctx, users.patcher, e.ns, "app", map[string]any{probespec.ApprovedReachAnnotation: v})
			if !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), "probed-probe-reach") ||
				!strings.Contains(err.Error(), "changing probed.io/approved-reach needs create on pods/exec for pod "+e.ns+"/app") {
				t.Errorf("%s: %v; want the policy's 403", what, err)
			}
		}
	})

	t.Run("webhook down: timing stays free", func(t *testing.T) {
		slower := probes{"app": {"livenessProbe": map[string]any{"exec": map[string]any{"command": []string{"cat", "/tmp/healthy"}}, "periodSeconds": 4},
			"readinessProbe": execSpec("sh", "-c", token)}}
		if err := setAnnotations(ctx, users.patcher, e.ns, "app", map[string]any{probespec.ProbesAnnotation: mustJSON(slower)}); err != nil {
			t.Fatal(err)
		}
		eventually(t, "the slower liveness probe", 20*time.Second, func() bool {
			for _, w := range p.debugProbes() {
				if w.PodName == "app" && strings.Contains(w.Spec, "exec [cat /tmp/healthy]") && strings.Contains(w.Spec, "period=4s") {
					return true
				}
			}
			return false
		})
		noWorkerRuns(t, p, "token")
	})

	t.Run("webhook down: a pods/exec user approves a new command by hand", func(t *testing.T) {
		next := e.pod("app")
		next.Annotations[probespec.ProbesAnnotation] = withReadiness(execSpec("cat", "/tmp/ready-2"))
		approval, err := probespec.ApproveReach(next)
		if err != nil {
			t.Fatal(err)
		}
		if err := setAnnotations(ctx, users.execer, e.ns, "app", map[string]any{
			probespec.ProbesAnnotation: next.Annotations[probespec.ProbesAnnotation], probespec.ApprovedReachAnnotation: approval,
		}); err != nil {
			t.Fatal(err)
		}
		eventually(t, "the approved command runs", 20*time.Second, func() bool { return ranCommand(p, "app", "exec [cat /tmp/ready-2]") })
		eventually(t, "probed_probes_unapproved_reach 0", 10*time.Second, func() bool {
			return len(p.metricLines("probed_probes_unapproved_reach 0")) == 1
		})
	})

	t.Run("an edit made while probed is down is judged the same", func(t *testing.T) {
		p.Shutdown()
		if err := setAnnotations(ctx, users.patcher, e.ns, "app", map[string]any{probespec.ProbesAnnotation: withReadiness(execSpec("sh", "-c", "id; "+token))}); err != nil {
			t.Fatal(err)
		}
		p = e.startProbed()
		eventually(t, "the InvalidProbe after the restart", 20*time.Second, func() bool {
			return len(p.metricLines("probed_probes_unapproved_reach 1")) == 1
		})
		e.waitCond("app", "ready.probed.io/app", v1.ConditionFalse, 20*time.Second)
		noWorkerRuns(t, p, "token")
		eventually(t, "the approved liveness probe runs after the restart", 20*time.Second, func() bool {
			return ranCommand(p, "app", "exec [cat /tmp/healthy]")
		})
	})

	t.Run("no approval: every probe edit needs pods/exec", func(t *testing.T) {
		bare := e.createPod("bare", mustJSON(created), true, container{name: "app"})
		if _, ok := bare.Annotations[probespec.ApprovedReachAnnotation]; ok {
			t.Errorf("created with the webhook down, yet approved: %v", bare.Annotations)
		}
		e.runPod(bare, ip, time.Minute)
		eventually(t, "its exec probe runs", 20*time.Second, func() bool { return ranCommand(p, "bare", "exec [cat /tmp/healthy]") })
		timed := probes{"app": {"livenessProbe": map[string]any{"exec": map[string]any{"command": []string{"cat", "/tmp/healthy"}}, "periodSeconds": 3},
			"readinessProbe": httpProbe(ready.Port, "/ready", nil)}}
		err := setAnnotations(ctx, users.patcher, e.ns, "bare", map[string]any{probespec.ProbesAnnotation: mustJSON(timed)})
		if !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), "changing probed.io/probes of a pod without probed.io/approved-reach needs create on pods/exec") {
			t.Errorf("a patch-only user's period edit: %v; want the policy's 403", err)
		}
		if err := setAnnotations(ctx, users.execer, e.ns, "bare", map[string]any{probespec.ProbesAnnotation: mustJSON(timed)}); err != nil {
			t.Errorf("a pods/exec user's period edit: %v", err)
		}
	})

	t.Run("pods/status and bindings need pods/exec too", func(t *testing.T) {
		// pods/status keeps metadata changes: a status writer is held as a
		// patch-only user is.
		err := setAnnotations(ctx, users.statusWriter, e.ns, "bare", map[string]any{probespec.ProbesAnnotation: withReadiness(execSpec("id"))}, "status")
		if !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), "changing probed.io/probes of a pod without probed.io/approved-reach") {
			t.Errorf("probes of a pod without approval, through pods/status: %v; want the policy's 403", err)
		}
		err = setAnnotations(ctx, users.statusWriter, e.ns, "app", map[string]any{probespec.ApprovedReachAnnotation: nil}, "status")
		if !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), "changing probed.io/approved-reach") {
			t.Errorf("the approval, through pods/status: %v; want the policy's 403", err)
		}
		unbound := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "unbound", Namespace: e.ns},
			Spec: v1.PodSpec{Containers: []v1.Container{{Name: "app", Image: "busybox"}}}}
		if _, err := client.CoreV1().Pods(e.ns).Create(ctx, unbound, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		bind := func(annotations map[string]string) error {
			return users.binder.CoreV1().Pods(e.ns).Bind(ctx, &v1.Binding{
				ObjectMeta: metav1.ObjectMeta{Name: "unbound", Namespace: e.ns, Annotations: annotations},
				Target:     v1.ObjectReference{Kind: "Node", Name: e.node},
			}, metav1.CreateOptions{})
		}
		err = bind(map[string]string{probespec.ProbesAnnotation: mustJSON(probes{"app": {"livenessProbe": execSpec("id")}})})
		if !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), "setting probed.io/probes or probed.io/approved-reach through a binding") {
			t.Errorf("a binding with probes: %v; want the policy's 403", err)
		}
		if err := bind(map[string]string{"scheduler.example/score": "7"}); err != nil {
			t.Errorf("a binding with other annotations: %v", err)
		}
	})
}
