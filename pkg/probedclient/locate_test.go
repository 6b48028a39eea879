package probedclient

import (
	"context"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
)

func probedPod(name, node string, phase corev1.PodPhase, ready bool, created time.Time) *corev1.Pod {
	st := corev1.ConditionFalse
	if ready {
		st = corev1.ConditionTrue
	}
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: DefaultNamespace, Labels: map[string]string{"app.kubernetes.io/name": "probed"},
			CreationTimestamp: metav1.NewTime(created)},
		Spec: corev1.PodSpec{NodeName: node, Containers: []corev1.Container{{Name: "probed",
			Ports: []corev1.ContainerPort{{Name: "metrics", ContainerPort: 19809}}}}},
		Status: corev1.PodStatus{Phase: phase, Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: st}}},
	}
}

// shadow labels p as a pod of probed's shadow DaemonSet.
func shadow(p *corev1.Pod) *corev1.Pod {
	p.Labels["app.kubernetes.io/component"] = "shadow"
	return p
}

// The fake clientset filters by labels but not by field selectors, so the
// cases keep one node's pods apart by what they expect.
func TestLocatorPod(t *testing.T) {
	t0 := time.Date(2026, 11, 25, 14, 0, 0, 0, time.UTC)
	ctx := context.Background()
	for _, tc := range []struct {
		name    string
		pods    []*corev1.Pod
		want    string
		wantErr string
	}{
		{"none", nil, "", "no probed pod on node n1 (namespace probed-system, selector app.kubernetes.io/name=probed,"},
		{"not running", []*corev1.Pod{probedPod("probed-a", "n1", corev1.PodPending, false, t0)}, "", "no running probed pod on node n1: found probed-a (Pending)"},
		{"ready first", []*corev1.Pod{
			probedPod("probed-old", "n1", corev1.PodRunning, true, t0),
			probedPod("probed-new", "n1", corev1.PodRunning, false, t0.Add(time.Minute)),
		}, "probed-old", ""},
		{"not its shadow", []*corev1.Pod{
			probedPod("probed-a", "n1", corev1.PodRunning, true, t0),
			shadow(probedPod("probed-shadow-a", "n1", corev1.PodRunning, true, t0.Add(time.Minute))),
		}, "probed-a", ""},
		{"newest of the ready", []*corev1.Pod{
			probedPod("probed-old", "n1", corev1.PodRunning, true, t0),
			probedPod("probed-new", "n1", corev1.PodRunning, true, t0.Add(time.Minute)),
		}, "probed-new", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := fake.NewClientset()
			for _, p := range tc.pods {
				if _, err := c.CoreV1().Pods(p.Namespace).Create(ctx, p, metav1.CreateOptions{}); err != nil {
					t.Fatal(err)
				}
			}
			got, err := Locator{Client: c, Namespace: DefaultNamespace, Selector: DefaultSelector}.Pod(ctx, "n1")
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err = %v, want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil || got.Name != tc.want {
				t.Fatalf("Pod = %v, %v; want %s", got, err, tc.want)
			}
			if EndpointsPort(got) != 19809 {
				t.Errorf("EndpointsPort = %d, want the metrics port 19809", EndpointsPort(got))
			}
		})
	}
}

func TestEndpointsPortDefault(t *testing.T) {
	if got := EndpointsPort(&corev1.Pod{}); got != DefaultPort {
		t.Errorf("EndpointsPort = %d, want %d", got, DefaultPort)
	}
}
