//go:build integration

package integration

import (
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
)

// probed's token can do exactly what contract §7 grants, and the admission
// policy confines its status writes to pods on its own node.
func TestRBACAndNodeConfinement(t *testing.T) {
	t.Parallel()
	mine := newEnv(t)
	other := newEnv(t)
	cfg, err := clientcmd.BuildConfigFromFlags("", mine.kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	probed := kubernetes.NewForConfigOrDie(cfg)
	ip := loopbackIP()
	minePod := mine.runPod(mine.createPod("mine", "", false, container{name: "app"}), ip, time.Minute)
	otherPod := other.runPod(other.createPod("theirs", "", false, container{name: "app"}), ip, time.Minute)

	apply := func(p *v1.Pod) error {
		ac := corev1ac.Pod(p.Name, p.Namespace).WithUID(p.UID).WithStatus(corev1ac.PodStatus().WithConditions(
			corev1ac.PodCondition().WithType("probed.io/ready").WithStatus(v1.ConditionTrue).
				WithLastTransitionTime(metav1.Now()).WithReason("AllProbesSucceeded")))
		_, err := probed.CoreV1().Pods(p.Namespace).ApplyStatus(mine.ctx, ac, metav1.ApplyOptions{FieldManager: "probed", Force: true})
		return err
	}
	if err := apply(minePod); err != nil {
		t.Errorf("status write to a pod on probed's own node refused: %v", err)
	}
	err = apply(otherPod)
	if !apierrors.IsForbidden(err) && !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), "its own node") {
		t.Errorf("status write to a pod on another node: err = %v, want denied by the node-confinement policy", err)
	}
	// The admin is not confined: the policy matches probed's account only.
	if _, err := client.CoreV1().Pods(other.ns).ApplyStatus(other.ctx, corev1ac.Pod("theirs", other.ns).WithStatus(corev1ac.PodStatus().WithConditions(
		corev1ac.PodCondition().WithType("example.com/admin").WithStatus(v1.ConditionTrue))), metav1.ApplyOptions{FieldManager: "admin"}); err != nil {
		t.Errorf("admin status write refused: %v", err)
	}

	// Granted: list/watch/get pods, create events.
	if _, err := probed.CoreV1().Pods("").List(mine.ctx, metav1.ListOptions{FieldSelector: "spec.nodeName=" + mine.node}); err != nil {
		t.Errorf("list pods: %v", err)
	}
	if _, err := probed.CoreV1().Events(mine.ns).Create(mine.ctx, &v1.Event{
		ObjectMeta:     metav1.ObjectMeta{GenerateName: "probed-"},
		InvolvedObject: v1.ObjectReference{Kind: "Pod", Namespace: mine.ns, Name: "mine", UID: minePod.UID},
		Reason:         "Test", Message: "rbac", Type: v1.EventTypeNormal, Source: v1.EventSource{Component: "probed"},
	}, metav1.CreateOptions{}); err != nil {
		t.Errorf("create event: %v", err)
	}
	// Not granted: everything else.
	forbidden := map[string]error{}
	_, forbidden["get secrets"] = probed.CoreV1().Secrets(mine.ns).List(mine.ctx, metav1.ListOptions{})
	forbidden["delete pod"] = probed.CoreV1().Pods(mine.ns).Delete(mine.ctx, "mine", metav1.DeleteOptions{})
	cur := minePod.DeepCopy()
	cur.Labels = map[string]string{"x": "y"}
	_, forbidden["update pod"] = probed.CoreV1().Pods(mine.ns).Update(mine.ctx, cur, metav1.UpdateOptions{})
	_, forbidden["update pod status (PUT)"] = probed.CoreV1().Pods(mine.ns).UpdateStatus(mine.ctx, minePod, metav1.UpdateOptions{})
	_, forbidden["list nodes"] = probed.CoreV1().Nodes().List(mine.ctx, metav1.ListOptions{})
	_, forbidden["create pod"] = probed.CoreV1().Pods(mine.ns).Create(mine.ctx, &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "x"},
		Spec: v1.PodSpec{Containers: []v1.Container{{Name: "c", Image: "i"}}}}, metav1.CreateOptions{})
	for what, err := range forbidden {
		if !apierrors.IsForbidden(err) {
			t.Errorf("%s: err = %v, want Forbidden", what, err)
		}
	}
}
