//go:build integration

package integration

import (
	"bytes"
	"context"
	"encoding/json"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	v1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/probed-dev/probed/pkg/probeview"
	"github.com/probed-dev/probed/test/harness/proc"
)

var (
	pluginBinOnce sync.Once
	pluginBin     string
	pluginBinErr  error
)

// buildPlugin builds cmd/kubectl-probed as it ships (CGO off, as the
// tiers' other static builds, whose cache it shares).
func buildPlugin(t *testing.T) string {
	t.Helper()
	pluginBinOnce.Do(func() {
		pluginBin = filepath.Join(filepath.Dir(probedBin), "kubectl-probed")
		pluginBinErr = proc.Build(context.Background(), pluginBin, "./cmd/kubectl-probed", proc.BuildOptions{Shipped: true})
	})
	if pluginBinErr != nil {
		t.Fatal(pluginBinErr)
	}
	return pluginBin
}

// TestKubectlProbedStatusWho runs `kubectl probed status` on the real API
// server, as kubectl resolves names: deploy/web by the Deployment's
// selector, -l by labels, no name for the namespace. It reads the API
// server only: probed's pod here is an object (Ready on one node, none on
// the other), and the table says which gated pod no probed answers.
func TestKubectlProbedStatusWho(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	bin := buildPlugin(t)
	bare := e.node + "-bare"
	if _, err := cp.CreateNode(e.ctx, bare); err != nil {
		t.Fatal(err)
	}
	probedNS := e.ns + "-probed"
	if err := cp.EnsureNamespace(e.ctx, probedNS); err != nil {
		t.Fatal(err)
	}
	// probed's DaemonSet pod on the env's node, Ready.
	pp, err := client.CoreV1().Pods(probedNS).Create(e.ctx, &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "probed-x", Labels: map[string]string{"app.kubernetes.io/name": "probed"}},
		Spec:       v1.PodSpec{NodeName: e.node, Containers: []v1.Container{{Name: "probed", Image: "probed", Args: []string{"-v=2"}}}},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	pp.Status.Phase = v1.PodRunning
	pp.Status.Conditions = []v1.PodCondition{{Type: v1.PodReady, Status: v1.ConditionTrue}}
	if _, err := client.CoreV1().Pods(probedNS).UpdateStatus(e.ctx, pp, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}

	// A Deployment (no controller runs here: its pods are made below, with
	// its labels) and a pod of something else.
	labels := map[string]string{"app": "web"}
	replicas := int32(2)
	if _, err := client.AppsV1().Deployments(e.ns).Create(e.ctx, &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: "web"},
		Spec: appsv1.DeploymentSpec{Replicas: &replicas, Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: v1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: v1.PodSpec{Containers: []v1.Container{{Name: "app", Image: "busybox"}}}}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	readiness := `{"app": {"readinessProbe": {"tcpSocket": {"port": 8080}}}}`
	mk := func(name, node string, l map[string]string, liveness bool) {
		pod := &v1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: name, Labels: l, Annotations: map[string]string{"probed.io/probes": readiness}},
			Spec: v1.PodSpec{NodeName: node, ReadinessGates: []v1.PodReadinessGate{{ConditionType: "probed.io/ready"}},
				Containers: []v1.Container{{Name: "app", Image: "busybox"}}},
		}
		if liveness {
			pod.Spec.Containers[0].LivenessProbe = &v1.Probe{ProbeHandler: v1.ProbeHandler{Exec: &v1.ExecAction{Command: []string{"true"}}}}
		}
		if _, err := client.CoreV1().Pods(e.ns).Create(e.ctx, pod, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	mk("web-1", e.node, labels, true)
	mk("web-2", bare, labels, false)
	mk("other", e.node, map[string]string{"app": "other"}, false)

	cacheDir := t.TempDir() // discovery, once for every run
	run := func(args ...string) (stdout, stderr string) {
		t.Helper()
		ctx, cancel := context.WithTimeout(e.ctx, time.Minute)
		defer cancel()
		cmd := exec.CommandContext(ctx, bin, append(args, "--kubeconfig", cp.KubeconfigPath, "--cache-dir", cacheDir,
			"-n", e.ns, "--probed-namespace", probedNS)...)
		var out, errOut bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &errOut
		if err := cmd.Run(); err != nil {
			t.Fatalf("kubectl probed %q: %v\n%s", args, err, errOut.String())
		}
		return out.String(), errOut.String()
	}
	views := func(args ...string) map[string]probeview.PodView {
		t.Helper()
		out, _ := run(append(args, "-o", "json")...)
		var vs []probeview.PodView
		if err := json.Unmarshal([]byte(out), &vs); err != nil {
			t.Fatalf("%q: %v\n%s", args, err, out)
		}
		m := map[string]probeview.PodView{}
		for _, v := range vs {
			m[v.Name] = v
		}
		return m
	}
	names := func(m map[string]probeview.PodView) []string {
		var out []string
		for n := range m {
			out = append(out, n)
		}
		slices.Sort(out)
		return out
	}

	got := views("status", "deploy/web")
	if n := names(got); !slices.Equal(n, []string{"web-1", "web-2"}) {
		t.Fatalf("deploy/web: pods %v, want web-1 and web-2", n)
	}
	if v := got["web-1"]; v.Unanswered() || v.Probed == nil || v.Probed.Name != "probed-x" ||
		!slices.Equal(v.Probes, []probeview.ProbeRunner{{Container: "app", ProbeType: "Liveness", By: probeview.RunByKubelet}, {Container: "app", ProbeType: "Readiness", By: probeview.RunByProbed}}) {
		t.Errorf("web-1: %+v", v)
	}
	if v := got["web-2"]; !v.Unanswered() || v.Probed != nil || !slices.Contains(v.Notes, "no probed on node: gate unanswered") {
		t.Errorf("web-2, on a node without probed: %+v", v)
	}
	if n := names(views("status", "-l", "app=other")); !slices.Equal(n, []string{"other"}) {
		t.Errorf("-l app=other: pods %v", n)
	}
	if n := names(views("status")); !slices.Equal(n, []string{"other", "web-1", "web-2"}) {
		t.Errorf("the namespace: pods %v", n)
	}

	out, errOut := run("status", "deployment/web", "pod/other")
	for _, want := range []string{"web-2  " + bare, "app:readiness=probed", "no probed on node: gate unanswered", "other  " + e.node} {
		if !strings.Contains(out, want) {
			t.Errorf("the table lacks %q:\n%s", want, out)
		}
	}
	if !strings.Contains(errOut, "warning: 1 pod(s) wait on the probed.io/ready gate on nodes where no ready probed runs: "+bare+" (1)") {
		t.Errorf("no warning naming %s: %q", bare, errOut)
	}

	// An account that may read the pod but nothing in probed's namespace is
	// told which Role grants the rest.
	reader := "reader"
	if _, err := client.CoreV1().ServiceAccounts(e.ns).Create(e.ctx, &v1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: reader}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := client.RbacV1().Roles(e.ns).Create(e.ctx, &rbacv1.Role{
		ObjectMeta: metav1.ObjectMeta{Name: reader},
		Rules:      []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"pods"}, Verbs: []string{"get", "list"}}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := client.RbacV1().RoleBindings(e.ns).Create(e.ctx, &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: reader},
		RoleRef:    rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "Role", Name: reader},
		Subjects:   []rbacv1.Subject{{Kind: "ServiceAccount", Name: reader, Namespace: e.ns}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	tr, err := client.CoreV1().ServiceAccounts(e.ns).CreateToken(e.ctx, reader, &authenticationv1.TokenRequest{}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(e.ctx, time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, "status", "web-1", "--kubeconfig", e.kubeconfigForToken(tr.Status.Token),
		"--cache-dir", cacheDir, "-n", e.ns, "--probed-namespace", probedNS)
	var forbidden bytes.Buffer
	cmd.Stderr = &forbidden
	if err := cmd.Run(); err == nil || !strings.Contains(forbidden.String(), "forbidden") || !strings.Contains(forbidden.String(), "Role probed-plugin-user") {
		t.Errorf("status as %s: err=%v, stderr:\n%s\nwant a refusal naming the Role probed-plugin-user", reader, err, forbidden.String())
	}
}
