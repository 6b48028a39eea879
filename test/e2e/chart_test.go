//go:build e2e

package e2e

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	authorizationv1 "k8s.io/api/authorization/v1"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/yaml"
)

// chartNS and chartRelease are where TestChartInstall installs the chart:
// beside deploy/'s probed-system, under names of its own (fullnameOverride),
// so that Helm owns every object it makes.
const (
	chartNS      = "probed-chart"
	chartRelease = "probed-chart"
)

// TestChartInstall installs charts/probed on the node with helm, as
// docs/install.md says (the namespace labelled first, then helm install),
// in place of the probed that TestMain deployed from deploy/: probed comes
// up Ready from the chart's objects alone and probes (a gated pod becomes
// Ready through it, its exec probe going through the chart's runtime
// mounts). helm upgrade rolls probed and the gated pod stays Ready
// throughout; after helm uninstall a new gated pod is not Ready. deploy/'s
// probed is restored afterwards, whatever happened.
//
// It runs before the parallel scenarios start (Go runs top-level tests one
// by one, and this one is not parallel), so they see only deploy/'s probed.
func TestChartInstall(t *testing.T) {
	began := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	helm := helmBinary(t)

	// Only one probed may run on a node: deploy/'s goes first.
	stopDeployProbed(ctx, t)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
		defer cancel()
		_, _ = runHelm(ctx, helm, "uninstall", chartRelease, "--namespace", chartNS, "--wait", "--timeout", "2m")
		_ = client.CoreV1().Namespaces().Delete(ctx, chartNS, metav1.DeleteOptions{})
		if err := nd.DeployProbed(ctx, probedImage, probedArgs...); err != nil {
			t.Errorf("restoring deploy/'s probed: %v", err)
		}
		t.Logf("chart test with restore took %v", time.Since(began).Round(time.Millisecond))
	})

	// docs/install.md: the namespace, with the pod-security label, first.
	if _, err := client.CoreV1().Namespaces().Create(ctx, &v1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: chartNS,
		Labels: map[string]string{"pod-security.kubernetes.io/enforce": "privileged"}}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	values := chartValues(t, 2)
	t0 := time.Now()
	if out, err := runHelm(ctx, helm, "install", chartRelease, filepath.Join(repoRoot, "charts/probed"),
		"--namespace", chartNS, "--values", values, "--wait", "--timeout", "3m"); err != nil {
		t.Fatalf("helm install: %v\n%s", err, out)
	}
	t.Logf("helm install --wait: %v", time.Since(t0).Round(time.Millisecond))
	first := chartProbedPod(ctx, t, "")
	if first.Spec.ServiceAccountName != chartRelease || first.Spec.Containers[0].Image != probedImage {
		t.Errorf("the chart's probed pod runs as %q with %q", first.Spec.ServiceAccountName, first.Spec.Containers[0].Image)
	}

	if podSource == "kubelet" {
		checkChartPodSource(ctx, t, first)
	}

	// It probes: an exec readiness probe passes, and the gate opens.
	s := newSC(t, "chart-readiness", regular)
	s.group = "chart"
	s.create(s.newPod("app", shell("sleep 3600"), probes{Readiness: &v1.Probe{
		ProbeHandler: execHandler("true"), PeriodSeconds: 1}}))
	s.poll("Ready through the chart's probed", 500*time.Millisecond, podStartTimeout, func(p *v1.Pod) (bool, error) {
		return condStatus(p, s.readyCond()) == v1.ConditionTrue && isReady(p), nil
	})
	s.note("Ready through the chart's probed after %v", s.elapsed())

	// helm upgrade (a new -v) rolls probed; the gated pod stays Ready.
	t0 = time.Now()
	upgrade, newValues := make(chan error, 1), chartValues(t, 3)
	go func() {
		out, err := runHelm(ctx, helm, "upgrade", chartRelease, filepath.Join(repoRoot, "charts/probed"),
			"--namespace", chartNS, "--values", newValues, "--wait", "--timeout", "3m")
		if err != nil {
			err = fmt.Errorf("%w\n%s", err, out)
		}
		upgrade <- err
	}()
	// Polled here, not with s.observe: the watch ends when helm returns.
	var upgradeErr error
	done, notReady := false, ""
	err := wait.PollUntilContextTimeout(ctx, 250*time.Millisecond, 4*time.Minute, true, func(ctx context.Context) (bool, error) {
		if p := s.get(); !isReady(p) {
			notReady = summarize(p)
			return true, nil
		}
		select {
		case upgradeErr = <-upgrade:
			done = true
			return true, nil
		default:
			return false, nil
		}
	})
	if notReady != "" {
		t.Errorf("the gated pod was not Ready during helm upgrade: %s", notReady)
	}
	if !done {
		t.Fatalf("helm upgrade did not finish: %v", err)
	}
	if upgradeErr != nil {
		t.Fatalf("helm upgrade: %v", upgradeErr)
	}
	// Waits for the new pod: helm upgrade replaced it.
	chartProbedPod(ctx, t, first.UID)
	t.Logf("helm upgrade --wait: %v", time.Since(t0).Round(time.Millisecond))

	// helm uninstall: no probed, so a new gated pod is never Ready.
	t0 = time.Now()
	if out, err := runHelm(ctx, helm, "uninstall", chartRelease, "--namespace", chartNS, "--wait", "--timeout", "2m"); err != nil {
		t.Fatalf("helm uninstall: %v\n%s", err, out)
	}
	t.Logf("helm uninstall --wait: %v", time.Since(t0).Round(time.Millisecond))
	orphan := newSC(t, "chart-uninstalled", regular)
	orphan.group = "chart"
	orphan.create(orphan.newPod("app", shell("sleep 3600"), probes{Readiness: &v1.Probe{
		ProbeHandler: execHandler("true"), PeriodSeconds: 1}}))
	orphan.waitContainerStarted()
	orphan.observe("not Ready without probed", 500*time.Millisecond, 10*time.Second, func(p *v1.Pod) error {
		if isReady(p) || condStatus(p, gateCondition) == v1.ConditionTrue {
			return fmt.Errorf("Ready with no probed on the node")
		}
		return nil
	})
	t.Logf("chart install, probe, upgrade, uninstall: %v", time.Since(began).Round(time.Millisecond))
}

// helmBinary builds helm if needed (hack/helm.sh; the e2e tier runs it
// first, so this only finds it).
func helmBinary(t *testing.T) string {
	t.Helper()
	var stderr bytes.Buffer
	cmd := exec.Command("bash", filepath.Join(repoRoot, "hack/helm.sh"))
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("hack/helm.sh: %v\n%s", err, stderr.String())
	}
	return filepath.Join(strings.TrimSpace(string(out)), "helm")
}

// runHelm runs helm against the node's API server, with its own config and
// cache dirs.
func runHelm(ctx context.Context, helm string, args ...string) (string, error) {
	home := filepath.Join(nd.RunDir, "helm")
	cmd := exec.CommandContext(ctx, helm, append(args, "--kubeconfig", nd.KubeconfigPath)...)
	cmd.Env = append(os.Environ(), "HELM_CACHE_HOME="+home+"/cache", "HELM_CONFIG_HOME="+home+"/config", "HELM_DATA_HOME="+home+"/data")
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// chartValues writes the values this node needs, with klog verbosity v:
// the chart's defaults but for what only this harness knows (as
// node.DeployProbed patches deploy/): the local image, this node's
// containerd socket, probed's endpoints on a free loopback port, and the
// API server on loopback (no kube-proxy routes the kubernetes Service). The
// webhook is off: its image is not built for this tier.
func chartValues(t *testing.T, v int) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	host, apiPort, err := net.SplitHostPort(strings.TrimPrefix(nd.RESTConfig().Host, "https://"))
	if err != nil {
		t.Fatal(err)
	}
	vals := map[string]any{
		"fullnameOverride": chartRelease,
		"image":            map[string]any{"repository": "probed", "tag": "dev", "pullPolicy": "IfNotPresent"},
		"flags": map[string]any{
			"runtime-endpoint":        nd.ContainerdEndpoint,
			"metrics-bind-address":    fmt.Sprintf("127.0.0.1:%d", port),
			"v":                       v,
			"liveness-restart-budget": 0,
		},
		"extraEnv": []map[string]string{
			{"name": "KUBERNETES_SERVICE_HOST", "value": host},
			{"name": "KUBERNETES_SERVICE_PORT", "value": apiPort},
		},
		"webhook": map[string]any{"enabled": false},
	}
	// As the tier runs deploy/'s probed: from the kubelet's Pods API where
	// the kubelet serves it, with the chart's own narrower RBAC.
	if podSource == "kubelet" {
		vals["podSource"] = map[string]any{"mode": "kubelet", "kubeletPodsAPIDir": filepath.Dir(nd.KubeletPodsAPISocket())}
	}
	b, err := yaml.Marshal(vals)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), fmt.Sprintf("values-v%d.yaml", v))
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// stopDeployProbed deletes deploy/'s DaemonSet and waits until its pod is gone.
func stopDeployProbed(ctx context.Context, t *testing.T) {
	t.Helper()
	ns := nd.ProbedNamespace()
	err := client.AppsV1().DaemonSets(ns).Delete(ctx, "probed", metav1.DeleteOptions{})
	if err != nil && !apierrors.IsNotFound(err) {
		t.Fatal(err)
	}
	err = wait.PollUntilContextTimeout(ctx, 250*time.Millisecond, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		pods, err := client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: "app.kubernetes.io/name=probed"})
		return err == nil && len(pods.Items) == 0, nil
	})
	if err != nil {
		t.Fatalf("deploy/'s probed pod never went: %v", err)
	}
}

// chartProbedPod waits for the chart's probed pod, other than not, to be
// Ready (helm's --wait may return first: a 10% maxUnavailable of one node
// is one) and returns it.
func chartProbedPod(ctx context.Context, t *testing.T, not types.UID) *v1.Pod {
	t.Helper()
	var ready *v1.Pod
	last := "no pod"
	err := wait.PollUntilContextTimeout(ctx, 250*time.Millisecond, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		pods, err := client.CoreV1().Pods(chartNS).List(ctx, metav1.ListOptions{LabelSelector: "app.kubernetes.io/name=probed"})
		if err != nil {
			return false, nil
		}
		var live []*v1.Pod
		for i := range pods.Items {
			if pods.Items[i].DeletionTimestamp == nil {
				live = append(live, &pods.Items[i])
			}
		}
		if len(live) == 1 && isReady(live[0]) && live[0].UID != not {
			ready = live[0]
			return true, nil
		}
		last = fmt.Sprintf("%d live pods of %d", len(live), len(pods.Items))
		return false, nil
	})
	if err != nil {
		t.Fatalf("the chart's probed pod never became Ready (%s): %v", last, err)
	}
	return ready
}

// checkChartPodSource: the chart's probed, with podSource.mode=kubelet,
// reads its pods from the kubelet (its log says so), and the chart's
// ClusterRole lets its service account neither list nor watch pods.
func checkChartPodSource(ctx context.Context, t *testing.T, p *v1.Pod) {
	t.Helper()
	var line string
	err := wait.PollUntilContextTimeout(ctx, time.Second, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		b, err := client.CoreV1().Pods(chartNS).GetLogs(p.Name, &v1.PodLogOptions{Container: "probed"}).DoRaw(ctx)
		if err != nil {
			return false, nil
		}
		for _, l := range strings.Split(string(b), "\n") {
			if strings.Contains(l, `"Pod source"`) {
				line = l
				return true, nil
			}
		}
		return false, nil
	})
	if err != nil || !strings.Contains(line, `source="kubelet"`) {
		t.Errorf(`the chart's probed with podSource.mode=kubelet: its "Pod source" line %q (%v), want source="kubelet"`, line, err)
	}
	for _, verb := range []string{"list", "watch"} {
		r, err := client.AuthorizationV1().SubjectAccessReviews().Create(ctx, &authorizationv1.SubjectAccessReview{
			Spec: authorizationv1.SubjectAccessReviewSpec{
				User:               "system:serviceaccount:" + chartNS + ":" + p.Spec.ServiceAccountName,
				Groups:             []string{"system:serviceaccounts", "system:serviceaccounts:" + chartNS, "system:authenticated"},
				ResourceAttributes: &authorizationv1.ResourceAttributes{Verb: verb, Resource: "pods"},
			},
		}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if r.Status.Allowed {
			t.Errorf("the chart's probed (podSource.mode=kubelet) may %s pods", verb)
		}
	}
}
