//go:build integration

package integration

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/probed-dev/probed/test/harness/controlplane"
)

// confinement is one probed identity, whose bound token names node, and two
// pods: mine on node, theirs on another node.
type confinement struct {
	ctx    context.Context
	admin  kubernetes.Interface
	probed kubernetes.Interface
	node   string
	mine   *v1.Pod
	theirs *v1.Pod
	// prefix is the install's kustomize namePrefix: its policies are
	// <prefix>probed-node-confinement and <prefix>probed-event-confinement.
	prefix string
}

// check proves deploy/confinement.yaml on c's identity: pod status, core/v1
// and events.k8s.io/v1 events are confined to its node; the admin is not.
func (c *confinement) check(t *testing.T) {
	t.Helper()
	other := c.theirs.Spec.NodeName
	pods, events := c.prefix+"probed-node-confinement", c.prefix+"probed-event-confinement"

	// Policies reach admission through an informer: wait for the first
	// denial of each, then expect every answer at once.
	c.waitDenied(t, "status write to a pod on another node", pods, func() error { return c.applyStatus(c.probed, c.theirs) })
	if err := c.applyStatus(c.probed, c.mine); err != nil {
		t.Errorf("status write to a pod on probed's own node refused: %v", err)
	}

	// core/v1, as client-go's record.EventBroadcaster writes them.
	c.waitDenied(t, "core event with another node's source.host", events, func() error {
		_, err := c.coreEvent(c.probed, c.mine, other, other)
		return err
	})
	if ev, err := c.coreEvent(c.probed, c.mine, c.node, c.node); err != nil {
		t.Errorf("core event from probed's own node refused: %v", err)
	} else {
		// A repeat: the correlator patches count and message.
		if err := c.patchEvent(c.probed, ev, `{"count":2,"message":"again"}`); err != nil {
			t.Errorf("patching its own event refused: %v", err)
		}
		c.denied(t, "patch moving its event to another node", events,
			c.patchEvent(c.probed, ev, fmt.Sprintf(`{"source":{"host":%q},"reportingInstance":%q}`, other, other)))
	}
	_, err := c.coreEvent(c.probed, c.mine, "", "")
	c.denied(t, "core event without source.host", events, err)
	_, err = c.coreEvent(c.probed, c.mine, c.node, other)
	c.denied(t, "core event whose reportingInstance is another node", events, err)
	// Another node's event cannot be taken over, even by rewriting its host.
	if ev, err := c.coreEvent(c.admin, c.mine, other, other); err != nil {
		t.Errorf("admin event: %v", err)
	} else {
		c.denied(t, "patch taking over another node's event", events,
			c.patchEvent(c.probed, ev, fmt.Sprintf(`{"source":{"host":%q},"reportingInstance":%q}`, c.node, c.node)))
	}

	// events.k8s.io/v1: the same objects; reportingInstance is the source
	// (that API refuses deprecatedSource, and a change of either, itself).
	series := `{"series":{"count":2,"lastObservedTime":"` + time.Now().UTC().Format("2006-01-02T15:04:05.000000Z") + `"}}`
	if ev, err := c.eventsV1(c.probed, c.mine, c.node); err != nil {
		t.Errorf("events.k8s.io event from probed's own node refused: %v", err)
	} else if err := c.patchEventsV1(ev, series); err != nil {
		t.Errorf("events.k8s.io: patching its own event's series refused: %v", err)
	}
	_, err = c.eventsV1(c.probed, c.mine, other)
	c.denied(t, "events.k8s.io event whose reportingInstance is another node", events, err)
	if ev, err := c.eventsV1(c.admin, c.mine, other); err != nil {
		t.Errorf("admin events.k8s.io event: %v", err)
	} else {
		c.denied(t, "events.k8s.io patch of another node's event", events, c.patchEventsV1(ev, series))
	}

	// The admin is not confined: the policies match probed's account only.
	if _, err := c.admin.CoreV1().Pods(c.theirs.Namespace).ApplyStatus(c.ctx, corev1ac.Pod(c.theirs.Name, c.theirs.Namespace).
		WithStatus(corev1ac.PodStatus().WithConditions(corev1ac.PodCondition().WithType("example.com/admin").WithStatus(v1.ConditionTrue))),
		metav1.ApplyOptions{FieldManager: "admin"}); err != nil {
		t.Errorf("admin status write refused: %v", err)
	}
	if _, err := c.coreEvent(c.admin, c.theirs, "elsewhere", ""); err != nil {
		t.Errorf("admin event refused: %v", err)
	}
}

// applyStatus writes a condition as probed does (server-side apply).
func (c *confinement) applyStatus(as kubernetes.Interface, p *v1.Pod) error {
	ac := corev1ac.Pod(p.Name, p.Namespace).WithUID(p.UID).WithStatus(corev1ac.PodStatus().WithConditions(
		corev1ac.PodCondition().WithType("probed.io/ready").WithStatus(v1.ConditionTrue).
			WithLastTransitionTime(metav1.Now()).WithReason("AllProbesSucceeded")))
	_, err := as.CoreV1().Pods(p.Namespace).ApplyStatus(c.ctx, ac, metav1.ApplyOptions{FieldManager: "probed", Force: true})
	return err
}

// coreEvent creates a core/v1 event about p with what record's recorder
// sets: source {probed, host} and reportingInstance.
func (c *confinement) coreEvent(as kubernetes.Interface, p *v1.Pod, host, instance string) (*v1.Event, error) {
	now := metav1.Now()
	ev := &v1.Event{
		ObjectMeta:     metav1.ObjectMeta{GenerateName: "probed-", Namespace: p.Namespace},
		InvolvedObject: v1.ObjectReference{Kind: "Pod", APIVersion: "v1", Namespace: p.Namespace, Name: p.Name, UID: p.UID},
		Reason:         "Test", Message: "confinement", Type: v1.EventTypeNormal,
		Source:         v1.EventSource{Component: "probed", Host: host},
		FirstTimestamp: now, LastTimestamp: now, Count: 1,
	}
	if instance != "" {
		ev.ReportingController, ev.ReportingInstance = "probed", instance
	}
	return as.CoreV1().Events(p.Namespace).Create(c.ctx, ev, metav1.CreateOptions{})
}

func (c *confinement) patchEvent(as kubernetes.Interface, ev *v1.Event, patch string) error {
	_, err := as.CoreV1().Events(ev.Namespace).Patch(c.ctx, ev.Name, types.StrategicMergePatchType, []byte(patch), metav1.PatchOptions{})
	return err
}

// eventsV1 creates an events.k8s.io/v1 event about p.
func (c *confinement) eventsV1(as kubernetes.Interface, p *v1.Pod, instance string) (*eventsv1.Event, error) {
	return as.EventsV1().Events(p.Namespace).Create(c.ctx, &eventsv1.Event{
		ObjectMeta:          metav1.ObjectMeta{GenerateName: "probed-", Namespace: p.Namespace},
		EventTime:           metav1.NewMicroTime(time.Now()),
		ReportingController: "probed", ReportingInstance: instance,
		Action: "Probe", Reason: "Test", Note: "confinement", Type: v1.EventTypeNormal,
		Regarding: v1.ObjectReference{Kind: "Pod", APIVersion: "v1", Namespace: p.Namespace, Name: p.Name, UID: p.UID},
	}, metav1.CreateOptions{})
}

// patchEventsV1 patches ev as probed through events.k8s.io/v1.
func (c *confinement) patchEventsV1(ev *eventsv1.Event, patch string) error {
	_, err := c.probed.EventsV1().Events(ev.Namespace).Patch(c.ctx, ev.Name, types.MergePatchType, []byte(patch), metav1.PatchOptions{})
	return err
}

// isDenial reports whether err is policy's refusal to write off probed's node.
func isDenial(err error, policy string) bool {
	return apierrors.IsForbidden(err) && strings.Contains(err.Error(), "ValidatingAdmissionPolicy '"+policy+"'") &&
		strings.Contains(err.Error(), "its own node")
}

func (c *confinement) denied(t *testing.T, what, policy string, err error) {
	t.Helper()
	if !isDenial(err, policy) {
		t.Errorf("%s: err = %v, want denied by %s", what, err, policy)
	}
}

// waitDenied retries write until policy denies it.
func (c *confinement) waitDenied(t *testing.T, what, policy string, write func() error) {
	t.Helper()
	var last error
	err := wait.PollUntilContextTimeout(c.ctx, 50*time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) {
		last = write()
		return isDenial(last, policy), nil
	})
	if err != nil {
		t.Fatalf("%s: never denied by %s; last err = %v", what, policy, last)
	}
}

// kubectlPath finds kubectl on $PATH or in $PROBED_K8S_BIN_DIR.
func kubectlPath(t *testing.T) string {
	t.Helper()
	if p, err := exec.LookPath("kubectl"); err == nil {
		return p
	}
	if p := filepath.Join(os.Getenv("PROBED_K8S_BIN_DIR"), "kubectl"); os.Getenv("PROBED_K8S_BIN_DIR") != "" {
		if _, err := os.Stat(p); err == nil {
			return p
		}
	}
	t.Skip("kubectl is not installed: it renders and applies the kustomize overlay")
	return ""
}

// deploy/ installed the way a user would move it: a kustomize overlay with
// namespace other-ns and namePrefix acme- (testdata/other-namespace),
// rendered and applied by kubectl. Its probed account, acme-probed in other-ns,
// is confined exactly as the default install's; an account named probed
// elsewhere gains nothing and is not confined. The install gets a control
// plane of its own, so the shared one's policies cannot stand in for its own.
func TestConfinementSurvivesNamespaceAndPrefix(t *testing.T) {
	t.Parallel()
	kubectl := kubectlPath(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()

	rendered, err := exec.CommandContext(ctx, kubectl, "kustomize", "testdata/other-namespace").Output()
	if err != nil {
		t.Fatalf("kubectl kustomize: %v", err)
	}
	if bytes.Contains(rendered, []byte("probed-system")) {
		t.Fatalf("the overlay still names probed-system:\n%s", rendered)
	}

	own, err := controlplane.Start(ctx, controlplane.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer own.Stop()
	apply := exec.CommandContext(ctx, kubectl, "--kubeconfig", own.KubeconfigPath, "apply", "-f", "-")
	apply.Stdin = bytes.NewReader(rendered)
	if out, err := apply.CombinedOutput(); err != nil {
		t.Fatalf("kubectl apply: %v\n%s", err, out)
	}
	admin := own.Client()
	crb, err := admin.RbacV1().ClusterRoleBindings().Get(ctx, "acme-probed", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if want := (rbacv1.Subject{Kind: "ServiceAccount", Name: "acme-probed", Namespace: "other-ns"}); len(crb.Subjects) != 1 || crb.Subjects[0] != want {
		t.Fatalf("rendered binding's subjects = %+v, want [%+v]", crb.Subjects, want)
	}
	// What kube-controller-manager would add to the namespaces.
	for _, ns := range []string{"other-ns", "apps"} {
		if err := own.EnsureNamespace(ctx, ns); err != nil {
			t.Fatal(err)
		}
	}
	var pods []*v1.Pod
	for _, node := range []string{"node-a", "node-b"} {
		if _, err := own.CreateNode(ctx, node); err != nil {
			t.Fatal(err)
		}
		p, err := admin.CoreV1().Pods("apps").Create(ctx, &v1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: "app-on-" + node},
			Spec:       v1.PodSpec{NodeName: node, Containers: []v1.Container{{Name: "app", Image: "busybox"}}},
		}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		pods = append(pods, p)
	}
	clientFor := func(ns, sa string) kubernetes.Interface {
		t.Helper()
		token, err := own.TokenFor(ctx, ns, sa, sa+"-node-a", "", "node-a")
		if err != nil {
			t.Fatal(err)
		}
		return kubernetes.NewForConfigOrDie(own.ConfigForToken(token))
	}

	c := &confinement{ctx: ctx, admin: admin, probed: clientFor("other-ns", "acme-probed"), node: "node-a",
		mine: pods[0], theirs: pods[1], prefix: "acme-"}
	c.check(t)

	// An account named probed in another namespace, with a token of node-a:
	// it has none of probed's grants,
	impostor := clientFor("default", "probed")
	impostorEvent := func() error {
		_, err := c.coreEvent(impostor, pods[1], "node-b", "")
		return err
	}
	for what, err := range map[string]error{"status write": c.applyStatus(impostor, pods[1]), "event": impostorEvent()} {
		if !apierrors.IsForbidden(err) || strings.Contains(err.Error(), "ValidatingAdmissionPolicy") {
			t.Errorf("%s by default/probed without a grant: err = %v, want Forbidden by RBAC", what, err)
		}
	}
	// and what it is granted on its own binding, not probed's, is not confined.
	if _, err := admin.RbacV1().Roles("apps").Create(ctx, &rbacv1.Role{
		ObjectMeta: metav1.ObjectMeta{Name: "writer"},
		Rules: []rbacv1.PolicyRule{
			{APIGroups: []string{""}, Resources: []string{"pods/status"}, Verbs: []string{"patch"}},
			{APIGroups: []string{""}, Resources: []string{"events"}, Verbs: []string{"create"}},
		},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := admin.RbacV1().RoleBindings("apps").Create(ctx, &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "writer"},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: "writer"},
		Subjects:   []rbacv1.Subject{{Kind: "ServiceAccount", Namespace: "default", Name: "probed"}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	// RBAC's informer picks the grant up shortly.
	var last error
	if err := wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) {
		last = c.applyStatus(impostor, pods[1])
		return last == nil, nil
	}); err != nil {
		t.Errorf("status write by default/probed, granted by its own binding, to a pod on another node: %v", last)
	}
	if err := impostorEvent(); err != nil {
		t.Errorf("event by default/probed, granted by its own binding, from another node: %v", err)
	}
}
