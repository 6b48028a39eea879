//go:build scale

package kubeletside

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes"
)

// site serves the site pods' probes from the test process on loopback, as
// the scale harness's node servers do for probed: readiness on /ready/<pod>,
// liveness on /live/<pod>, 200 unless the pod is set failing. The kubelet
// reaches it through httpGet.host, so a pod stays failing across its
// container's restarts, as on the probed side.
type site struct {
	port    int
	mu      sync.Mutex
	failing map[string]bool
}

func startSite(t *testing.T) *site {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := &site{port: ln.Addr().(*net.TCPAddr).Port, failing: map[string]bool{}}
	srv := &http.Server{Handler: s, ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })
	return s
}

func (s *site) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	parts := strings.Split(strings.Trim(r.URL.Path, "/"), "/")
	if len(parts) != 2 {
		http.NotFound(w, r)
		return
	}
	s.mu.Lock()
	fail := s.failing[parts[1]]
	s.mu.Unlock()
	if fail {
		http.Error(w, "failing", http.StatusInternalServerError)
		return
	}
	_, _ = w.Write([]byte("ok"))
}

func (s *site) setFailing(names []string, fail bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, n := range names {
		s.failing[n] = fail
	}
}

const siteLabel = "kubeletside-site"

// createSitePods creates n pods whose readiness (failure threshold 1) and
// liveness (failure threshold 3) probes, every 10 s with a 2 s timeout, are
// httpGets to the site: the scale harness's pod shape, probed by the kubelet.
func createSitePods(ctx context.Context, t *testing.T, c kubernetes.Interface, s *site, n int) []string {
	t.Helper()
	probe := func(kind string, name string, failures int32) *corev1.Probe {
		return &corev1.Probe{ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{
			Host: "127.0.0.1", Port: intstr.FromInt(s.port), Path: "/" + kind + "/" + name}},
			PeriodSeconds: readyPeriod, FailureThreshold: failures, TimeoutSeconds: 2}
	}
	var names []string
	for i := range n {
		name := fmt.Sprintf("site-%d", i)
		names = append(names, name)
		ctr := corev1.Container{Name: "app", Image: targetImage, ImagePullPolicy: corev1.PullNever, Args: []string{"--http=:8080"},
			ReadinessProbe: probe("ready", name, 1), LivenessProbe: probe("live", name, 3)}
		pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Labels: map[string]string{"app": siteLabel}},
			Spec: corev1.PodSpec{TerminationGracePeriodSeconds: ptr(int64(1)), Containers: []corev1.Container{ctr}}}
		if _, err := c.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	return names
}

// deletePods deletes the named pods and waits until they are gone, making
// room for the site pods under the kubelet's pod limit.
func deletePods(ctx context.Context, t *testing.T, c kubernetes.Interface, names []string) {
	t.Helper()
	for _, n := range names {
		if err := c.CoreV1().Pods(ns).Delete(ctx, n, metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	deadline := time.Now().Add(3 * time.Minute)
	for {
		list, err := c.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
		left := 0
		if err == nil {
			for _, p := range list.Items {
				for _, n := range names {
					if p.Name == n {
						left++
					}
				}
			}
			if left == 0 {
				return
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d of the first pods not gone within 3m", left)
		}
		time.Sleep(500 * time.Millisecond)
	}
}

// mark is what a Ready flip or a restart leaves on a pod.
type mark struct {
	readySince time.Time
	restarts   int32
}

func marks(ctx context.Context, t *testing.T, c kubernetes.Interface, names []string) map[string]mark {
	t.Helper()
	list, err := c.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]bool{}
	for _, n := range names {
		want[n] = true
	}
	out := map[string]mark{}
	for _, p := range list.Items {
		if !want[p.Name] {
			continue
		}
		var m mark
		for _, cond := range p.Status.Conditions {
			if cond.Type == corev1.PodReady {
				m.readySince = cond.LastTransitionTime.Time
			}
		}
		for _, cs := range p.Status.ContainerStatuses {
			m.restarts += cs.RestartCount
		}
		out[p.Name] = m
	}
	return out
}

// changes counts the pods whose Ready condition moved (any flip, down and
// back up included, moves its lastTransitionTime) and the container restarts
// between two marks.
func changes(before, after map[string]mark) (flipped []string, restarts int) {
	for n, b := range before {
		a := after[n]
		if !a.readySince.Equal(b.readySince) {
			flipped = append(flipped, n)
		}
		restarts += int(a.restarts - b.restarts)
	}
	return flipped, restarts
}
