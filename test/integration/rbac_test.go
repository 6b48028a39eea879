//go:build integration

package integration

import (
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
)

// probed's token can do exactly what contract §7 grants, and the admission
// policies confine its status writes and events to its own node.
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

	// Status writes and events (core and events.k8s.io) are confined to
	// probed's node; the admin is not.
	c := &confinement{ctx: mine.ctx, admin: client, probed: probed, node: mine.node, mine: minePod, theirs: otherPod}
	c.check(t)

	// Granted: list/watch/get pods (events: above).
	if _, err := probed.CoreV1().Pods("").List(mine.ctx, metav1.ListOptions{FieldSelector: "spec.nodeName=" + mine.node}); err != nil {
		t.Errorf("list pods: %v", err)
	}
	// Granted: get, and list and watch, a Node (its own, by a field
	// selector: the kubelet's version and the node's addresses).
	if _, err := probed.CoreV1().Nodes().Get(mine.ctx, mine.node, metav1.GetOptions{}); err != nil {
		t.Errorf("get its node: %v", err)
	}
	if _, err := probed.CoreV1().Nodes().List(mine.ctx, metav1.ListOptions{FieldSelector: "metadata.name=" + mine.node}); err != nil {
		t.Errorf("list its node: %v", err)
	}
	// What a stolen token reads, as docs/security.md ("What probed's
	// credentials can read") says: every namespace's pods and any Node,
	// not only its own node's.
	if all, err := probed.CoreV1().Pods("").List(mine.ctx, metav1.ListOptions{}); err != nil || !slicesContainsPod(all.Items, otherPod) {
		t.Errorf("list every pod: %v (docs/security.md says a stolen token can)", err)
	}
	if _, err := probed.CoreV1().Nodes().Get(mine.ctx, other.node, metav1.GetOptions{}); err != nil {
		t.Errorf("get another node: %v (docs/security.md says a stolen token can)", err)
	}
	// Not granted: everything else.
	forbidden := map[string]error{}
	_, forbidden["get secrets"] = probed.CoreV1().Secrets(mine.ns).List(mine.ctx, metav1.ListOptions{})
	forbidden["delete pod"] = probed.CoreV1().Pods(mine.ns).Delete(mine.ctx, "mine", metav1.DeleteOptions{})
	cur := minePod.DeepCopy()
	cur.Labels = map[string]string{"x": "y"}
	_, forbidden["update pod"] = probed.CoreV1().Pods(mine.ns).Update(mine.ctx, cur, metav1.UpdateOptions{})
	_, forbidden["update pod status (PUT)"] = probed.CoreV1().Pods(mine.ns).UpdateStatus(mine.ctx, minePod, metav1.UpdateOptions{})
	_, forbidden["create pod"] = probed.CoreV1().Pods(mine.ns).Create(mine.ctx, &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "x"},
		Spec: v1.PodSpec{Containers: []v1.Container{{Name: "c", Image: "i"}}}}, metav1.CreateOptions{})
	for what, err := range forbidden {
		if !apierrors.IsForbidden(err) {
			t.Errorf("%s: err = %v, want Forbidden", what, err)
		}
	}
}

func slicesContainsPod(pods []v1.Pod, p *v1.Pod) bool {
	for _, q := range pods {
		if q.UID == p.UID {
			return true
		}
	}
	return false
}
