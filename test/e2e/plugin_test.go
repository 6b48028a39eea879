//go:build e2e

package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	v1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/probed-dev/probed/test/harness/proc"
)

// TestKubectlPlugin runs the real kubectl-probed binary, as a user with only
// a service account token, against probed's DaemonSet pod on the real node:
// status and top go through the API server (a port-forward to the probed
// pod, via the kubelet) to probed, which is shown a short-lived token of
// deploy/'s probed-plugin account, never the user's, over TLS verified
// against the CA the probed pod published. Without the Role
// probed-plugin-user the user gets an error that names it; with it, the
// table shows the failing pod's history. The admin, a client certificate
// with no token at all, gets the same.
func TestKubectlPlugin(t *testing.T) {
	ctx := context.Background()
	bin := proc.BuildTB(t, "./cmd/kubectl-probed", proc.BuildOptions{})

	// A pod whose readiness probe always fails.
	ann, _ := json.Marshal(map[string]any{"main": map[string]any{
		"readinessProbe": map[string]any{"exec": map[string]any{"command": []string{"cat", "/tmp/ready"}}, "periodSeconds": 1},
	}})
	pod := &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "plugin-failing", Namespace: testNS, Annotations: map[string]string{"probed.io/probes": string(ann)}},
		Spec: v1.PodSpec{
			TerminationGracePeriodSeconds: ptr(int64(1)),
			ReadinessGates:                []v1.PodReadinessGate{{ConditionType: "probed.io/ready"}},
			Containers: []v1.Container{{Name: "main", Image: imgBusybox, ImagePullPolicy: v1.PullNever,
				Command: []string{"sh", "-c", "exec sleep 3600"}}},
		},
	}
	if _, err := client.CoreV1().Pods(testNS).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = client.CoreV1().Pods(testNS).Delete(context.Background(), pod.Name, metav1.DeleteOptions{})
	})

	// The user: a service account that may read the pod, and at first
	// nothing in probed's namespace.
	const user = "plugin-user"
	kubeconfig := pluginUser(ctx, t, user)
	runPluginAs := func(kubeconfig string, args ...string) (string, string, error) {
		ctx, cancel := context.WithTimeout(ctx, time.Minute)
		defer cancel()
		cmd := exec.CommandContext(ctx, bin, append(args, "--kubeconfig", kubeconfig)...)
		var out, errOut bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &errOut
		err := cmd.Run()
		return out.String(), errOut.String(), err
	}
	runPlugin := func(args ...string) (string, string, error) { return runPluginAs(kubeconfig, args...) }

	// Wait until probed has a few failures for the pod (read as admin).
	if err := wait.PollUntilContextTimeout(ctx, time.Second, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		body, err := nd.ProbedGet(ctx, "/debug/probes?namespace="+testNS+"&pod="+pod.Name)
		var entries []struct {
			History []struct {
				Result string `json:"result"`
			} `json:"history"`
		}
		if err != nil || json.Unmarshal(body, &entries) != nil || len(entries) != 1 {
			return false, nil
		}
		failures := 0
		for _, h := range entries[0].History {
			if h.Result == "failure" {
				failures++
			}
		}
		return failures >= 4, nil
	}); err != nil {
		t.Fatalf("probed never failed the pod's readiness probe 3 times: %v", err)
	}

	_, stderr, err := runPlugin("status", pod.Name, "-n", testNS)
	if err == nil || !strings.Contains(stderr, "probed-plugin-user") || !strings.Contains(stderr, "forbidden") {
		t.Fatalf("status without probed-plugin-user: err=%v, stderr:\n%s\nwant a refusal naming the Role probed-plugin-user", err, stderr)
	}
	t.Logf("without the role:\n%s", stderr)

	bindPluginUser(ctx, t, user)
	var stdout string
	if err := wait.PollUntilContextTimeout(ctx, 2*time.Second, 90*time.Second, true, func(ctx context.Context) (bool, error) {
		stdout, stderr, err = runPlugin("status", pod.Name, "-n", testNS)
		return err == nil, nil
	}); err != nil {
		t.Fatalf("status with probed-plugin-user never succeeded; last stderr:\n%s", stderr)
	}
	t.Logf("with the role:\n%s", stdout)
	// The admin: a client certificate, no token to show anyone.
	adminOut, adminErr, err := runPluginAs(nd.KubeconfigPath, "status", pod.Name, "-n", testNS)
	if err != nil || !strings.Contains(adminOut, "✗✗✗") {
		t.Errorf("status as the client-certificate admin: err=%v\n%s\n%s", err, adminOut, adminErr)
	}
	if !regexp.MustCompile(`(?m)^main +Readiness +running +failure ×\d+ +[✓✗!?·]*✗✗✗ `).MatchString(stdout) {
		t.Errorf("status has no row for main's failing readiness probe")
	}
	for _, want := range []string{
		"Pod " + testNS + "/" + pod.Name + " on node " + nd.Name,
		"✗✗✗",
		"exec [cat /tmp/ready]",
		"cat: can't open '/tmp/ready': No such file or directory",
	} {
		if !strings.Contains(stdout, want) {
			t.Errorf("status output lacks %q", want)
		}
	}

	if err := wait.PollUntilContextTimeout(ctx, 2*time.Second, 90*time.Second, true, func(ctx context.Context) (bool, error) {
		stdout, stderr, err = runPlugin("top", "--node", nd.Name, "--interval", "5s")
		return err == nil, nil
	}); err != nil {
		t.Fatalf("top never succeeded; last stderr:\n%s", stderr)
	}
	t.Logf("top:\n%s", stdout)
	var row []string
	for _, l := range strings.Split(stdout, "\n") {
		if f := strings.Fields(l); len(f) == 9 && f[1] == testNS && f[2] == pod.Name {
			row = f
		}
	}
	// NODE NAMESPACE POD CONTAINER PROBE P99 MEAN FAILED EXECS/MIN; one
	// probe a second is 60 a minute, give or take a tick in 5 s.
	if row == nil || row[3] != "main" || row[4] != "Readiness" || row[7] == "0" {
		t.Fatalf("top has no row with failures for %s/%s main Readiness:\n%s", testNS, pod.Name, stdout)
	}
	if perMin, err := strconv.ParseFloat(row[8], 64); err != nil || perMin < 36 || perMin > 84 {
		t.Errorf("EXECS/MIN = %s, want about 60", row[8])
	}
}

// pluginUser creates service account name in testNS, allowed to read its
// pods, and writes a kubeconfig with its token only.
func pluginUser(ctx context.Context, t *testing.T, name string) string {
	t.Helper()
	if _, err := client.CoreV1().ServiceAccounts(testNS).Create(ctx, &v1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	subject := []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: testNS, Name: name}}
	for ns, rules := range map[string][]rbacv1.PolicyRule{
		testNS: {{APIGroups: []string{""}, Resources: []string{"pods"}, Verbs: []string{"get"}}},
	} {
		if _, err := client.RbacV1().Roles(ns).Create(ctx, &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: name}, Rules: rules}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		if _, err := client.RbacV1().RoleBindings(ns).Create(ctx, &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: name},
			RoleRef: rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: name}, Subjects: subject}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	tr, err := client.CoreV1().ServiceAccounts(testNS).CreateToken(ctx, name, &authenticationv1.TokenRequest{
		Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr(int64(3600))}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	admin, err := clientcmd.LoadFromFile(nd.KubeconfigPath)
	if err != nil {
		t.Fatal(err)
	}
	cluster := admin.Clusters[admin.Contexts[admin.CurrentContext].Cluster]
	kc := clientcmdapi.NewConfig()
	kc.Clusters["node"] = cluster
	kc.AuthInfos[name] = &clientcmdapi.AuthInfo{Token: tr.Status.Token}
	kc.Contexts["node"] = &clientcmdapi.Context{Cluster: "node", AuthInfo: name}
	kc.CurrentContext = "node"
	path := filepath.Join(t.TempDir(), "kubeconfig")
	if err := clientcmd.WriteToFile(*kc, path); err != nil {
		t.Fatal(err)
	}
	return path
}

// bindPluginUser grants user deploy/kubectl-plugin.yaml's Role
// probed-plugin-user, as the docs tell an operator to.
func bindPluginUser(ctx context.Context, t *testing.T, user string) {
	t.Helper()
	rb := &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: user + "-probed-plugin-user"},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: "probed-plugin-user"},
		Subjects: []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: testNS, Name: user}}}
	if _, err := client.RbacV1().RoleBindings("probed-system").Create(ctx, rb, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = client.RbacV1().RoleBindings("probed-system").Delete(context.Background(), rb.Name, metav1.DeleteOptions{})
	})
}
