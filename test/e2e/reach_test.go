//go:build e2e

package e2e

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/probed-dev/probed/pkg/probespec"
)

// TestProbeEditCannotReadTheToken (issue 20, item 1) replays the security
// review's reproduction on the real node, with the real containerd exec:
// a user who may patch pods but not create pods/exec edits a running pod's
// annotation so that its readiness probe would print the pod's service
// account token. probed runs nothing of it (an InvalidProbe names the
// probe and why) and no condition or event carries the token; the pod's
// own exec probe ran in the container before, and a pods/exec user's
// approved change runs there after.
//
// Not parallel: it runs before the parallel tests start, so the adoption
// webhook another test deploys cannot refuse the edit at admission first
// (TestProbeEditNeedsExec in the integration tier covers that path); here
// probed itself is what stands in the way.
func TestProbeEditCannotReadTheToken(t *testing.T) {
	ctx := context.Background()
	const ns, name = "reach", "victim"
	if err := createNamespace(ctx, ns); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = client.CoreV1().Namespaces().Delete(context.Background(), ns, metav1.DeleteOptions{}) })
	users := map[string]kubernetes.Interface{}
	for user, rules := range map[string][]rbacv1.PolicyRule{
		"patcher": {{APIGroups: []string{""}, Resources: []string{"pods"}, Verbs: []string{"get", "patch"}}},
		"execer": {{APIGroups: []string{""}, Resources: []string{"pods"}, Verbs: []string{"get", "patch"}},
			{APIGroups: []string{""}, Resources: []string{"pods/exec"}, Verbs: []string{"create"}}},
	} {
		if _, err := client.RbacV1().Roles(ns).Create(ctx, &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: user}, Rules: rules}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		if _, err := client.RbacV1().RoleBindings(ns).Create(ctx, &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: user},
			RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: user},
			Subjects: []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.UserKind, Name: user}}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		cfg := rest.CopyConfig(nd.RESTConfig())
		cfg.Impersonate = rest.ImpersonationConfig{UserName: user}
		c, err := kubernetes.NewForConfig(cfg)
		if err != nil {
			t.Fatal(err)
		}
		users[user] = c
	}

	readiness := func(cmd ...string) string {
		b, _ := json.Marshal(map[string]probes{"app": {Readiness: &v1.Probe{ProbeHandler: execHandler(cmd...), PeriodSeconds: 1}}})
		return string(b)
	}
	pod := &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Annotations: map[string]string{probespec.ProbesAnnotation: readiness("cat", "/tmp/healthy")}},
		Spec: v1.PodSpec{
			ReadinessGates: []v1.PodReadinessGate{{ConditionType: gateCondition}},
			Containers: []v1.Container{{Name: "app", Image: imgBusybox, ImagePullPolicy: v1.PullNever,
				Command: []string{"/bin/sh", "-c", "touch /tmp/healthy; exec sleep 3600"}}},
			TerminationGracePeriodSeconds: ptr(int64(1)),
		},
	}
	// The creator approves what it creates, as the adoption webhook would
	// (it is not deployed here); the service account token is mounted.
	approval, err := probespec.ApproveReach(pod)
	if err != nil {
		t.Fatal(err)
	}
	pod.Annotations[probespec.ApprovedReachAnnotation] = approval
	created, err := client.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	getPod := func() *v1.Pod {
		p, err := client.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	waitFor := func(what string, timeout time.Duration, ok func(*v1.Pod) bool) {
		t.Helper()
		if err := wait.PollUntilContextTimeout(ctx, time.Second, timeout, true, func(context.Context) (bool, error) { return ok(getPod()), nil }); err != nil {
			t.Fatalf("timed out waiting for %s: %s", what, summarize(getPod()))
		}
	}
	waitFor("the pod Ready through its own exec probe", podStartTimeout, isReady)

	const token = "cat /var/run/secrets/kubernetes.io/serviceaccount/token; exit 1"
	patch := func(c kubernetes.Interface, annotations map[string]string) error {
		b, _ := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": annotations}})
		_, err := c.CoreV1().Pods(ns).Patch(ctx, name, types.MergePatchType, b, metav1.PatchOptions{})
		return err
	}
	if err := patch(users["patcher"], map[string]string{probespec.ProbesAnnotation: readiness("sh", "-c", token)}); err != nil {
		t.Fatalf("the patch-only user's metadata update: %v", err)
	}
	// A JSON Web Token starts with eyJ (base64 of `{"`).
	leaked := func() []string {
		var out []string
		for _, c := range getPod().Status.Conditions {
			if strings.Contains(c.Message, "eyJ") {
				out = append(out, "condition "+string(c.Type)+": "+c.Message)
			}
		}
		evs, err := client.CoreV1().Events(ns).List(ctx, metav1.ListOptions{FieldSelector: "involvedObject.uid=" + string(created.UID)})
		if err == nil {
			for _, e := range evs.Items {
				if strings.Contains(e.Message, "eyJ") {
					out = append(out, "event "+e.Reason+": "+e.Message)
				}
			}
		}
		return out
	}
	invalid := func() bool {
		evs, err := client.CoreV1().Events(ns).List(ctx, metav1.ListOptions{FieldSelector: "involvedObject.uid=" + string(created.UID)})
		if err != nil {
			return false
		}
		for _, e := range evs.Items {
			if e.Reason == "InvalidProbe" && e.Source.Component == "probed" &&
				strings.Contains(e.Message, `container "app" readinessProbe: exec.command: Forbidden: changed after the pod was created without pods/exec approval`) {
				return true
			}
		}
		return false
	}
	// Watch for as long as probed, every second, would have run it 15 times.
	deadline := time.Now().Add(15 * time.Second)
	for time.Now().Before(deadline) {
		if l := leaked(); len(l) > 0 {
			t.Fatalf("the token leaked:\n%s", strings.Join(l, "\n"))
		}
		time.Sleep(time.Second)
	}
	if !invalid() {
		t.Errorf("no InvalidProbe from probed naming the readiness probe: %s", summarize(getPod()))
	}
	if c := condition(getPod(), "ready.probed.io/app"); c == nil || c.Status != v1.ConditionFalse || c.Reason != "InvalidProbe" {
		t.Errorf("ready.probed.io/app = %+v; want False, InvalidProbe", c)
	}

	// A pods/exec user approves a new command, and it runs in the container.
	next := getPod()
	next.Annotations[probespec.ProbesAnnotation] = readiness("test", "-f", "/tmp/healthy")
	if approval, err = probespec.ApproveReach(next); err != nil {
		t.Fatal(err)
	}
	if err := patch(users["execer"], map[string]string{probespec.ProbesAnnotation: next.Annotations[probespec.ProbesAnnotation],
		probespec.ApprovedReachAnnotation: approval}); err != nil {
		t.Fatalf("the pods/exec user's approved edit: %v", err)
	}
	waitFor("Ready again through the approved command", time.Minute, func(p *v1.Pod) bool {
		c := condition(p, "ready.probed.io/app")
		return c != nil && c.Status == v1.ConditionTrue && isReady(p)
	})
}
