package controlplane_test

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	clientcmdv1 "k8s.io/client-go/tools/clientcmd/api/v1"

	"github.com/probed-dev/probed/test/harness/controlplane"
)

func TestControlPlane(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()

	begin := time.Now()
	cp, err := controlplane.Start(ctx, controlplane.Options{})
	if errors.Is(err, controlplane.ErrBinaryMissing) {
		t.Skipf("skipping: %v", err)
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cp.Stop() })
	t.Logf("control plane ready in %v at %s (run dir %s)", time.Since(begin).Round(time.Millisecond), cp.Host, cp.RunDir)

	// The kubeconfig file works on its own, and the binary reports its version.
	ver, err := kubernetes.NewForConfigOrDie(configFromKubeconfig(t, cp.KubeconfigPath)).Discovery().ServerVersion()
	if err != nil {
		t.Fatal(err)
	}
	if want := controlplane.WantVersion(); ver.GitVersion != want {
		t.Errorf("server version %q, want %q", ver.GitVersion, want)
	}

	client := cp.Client()
	if _, err := cp.CreateNode(ctx, "node-a"); err != nil {
		t.Fatal(err)
	}
	pod, err := client.CoreV1().Pods("default").Create(ctx, &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "app"},
		Spec: corev1.PodSpec{
			NodeName:       "node-a",
			ReadinessGates: []corev1.PodReadinessGate{{ConditionType: "probed.io/ready"}},
			Containers:     []corev1.Container{{Name: "app", Image: "busybox"}},
		},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}

	t.Run("SSA on pods/status keeps other managers' conditions", func(t *testing.T) {
		testApplyStatus(ctx, t, client)
	})

	t.Run("apiserver restart", func(t *testing.T) {
		if err := cp.StopAPIServer(); err != nil {
			t.Fatal(err)
		}
		if _, err := client.CoreV1().Pods("default").Get(ctx, "app", metav1.GetOptions{}); err == nil {
			t.Fatal("Get succeeded while the apiserver was stopped")
		}
		begin := time.Now()
		if err := cp.StartAPIServer(ctx); err != nil {
			t.Fatal(err)
		}
		t.Logf("apiserver restarted in %v", time.Since(begin).Round(time.Millisecond))
		got, err := client.CoreV1().Pods("default").Get(ctx, "app", metav1.GetOptions{})
		if err != nil {
			t.Fatalf("same client after restart: %v", err)
		}
		if got.UID != pod.UID {
			t.Errorf("pod UID changed across restart: %s -> %s", pod.UID, got.UID)
		}
	})

	t.Run("bound token carries node-name", func(t *testing.T) {
		if err := cp.EnsureNamespace(ctx, "kube-system"); err != nil {
			t.Fatal(err)
		}
		// A placeholder pod is created for probed on node-a.
		token, err := cp.TokenFor(ctx, "kube-system", "probed", "probed-node-a", "", "node-a")
		if err != nil {
			t.Fatal(err)
		}
		sa := kubernetes.NewForConfigOrDie(cp.ConfigForToken(token))
		review, err := sa.AuthenticationV1().SelfSubjectReviews().Create(ctx, &authenticationv1.SelfSubjectReview{}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		ui := review.Status.UserInfo
		if ui.Username != "system:serviceaccount:kube-system:probed" {
			t.Errorf("username %q", ui.Username)
		}
		if got := ui.Extra["authentication.kubernetes.io/node-name"]; len(got) != 1 || got[0] != "node-a" {
			t.Errorf("node-name extra = %v, want [node-a]; extra: %v", got, ui.Extra)
		}
		// RBAC is on: the service account has no role yet.
		_, err = sa.CoreV1().Pods("default").List(ctx, metav1.ListOptions{})
		if !apierrors.IsForbidden(err) {
			t.Errorf("list pods without a role: err = %v, want Forbidden", err)
		}
		// An existing pod by UID; the node it names must be the pod's.
		if _, err := cp.TokenFor(ctx, "default", "default", "app", pod.UID, "node-a"); err != nil {
			t.Error(err)
		}
		if _, err := cp.TokenFor(ctx, "default", "default", "app", pod.UID, "node-b"); err == nil {
			t.Error("TokenFor accepted a node the pod is not bound to")
		}
	})

	pids := cp.PIDs()
	runDir := cp.RunDir
	etcdData := cp.EtcdDataDir()
	if !strings.HasPrefix(etcdData, "/dev/shm/") {
		t.Errorf("etcd's data is in %s, want it on tmpfs", etcdData)
	}
	if len(pids) != 2 {
		t.Fatalf("PIDs() = %v, want etcd and kube-apiserver", pids)
	}
	if err := cp.Stop(); err != nil {
		t.Fatal(err)
	}
	if err := cp.Stop(); err != nil {
		t.Fatalf("second Stop: %v", err)
	}
	for name, pid := range pids {
		// Stop reaped the children, so the PIDs no longer exist.
		if err := syscall.Kill(pid, 0); !errors.Is(err, syscall.ESRCH) {
			t.Errorf("%s (pid %d) still exists after Stop: kill(0) = %v", name, pid, err)
		}
	}
	for _, dir := range []string{runDir, etcdData} {
		if _, err := os.Stat(dir); !os.IsNotExist(err) {
			t.Errorf("%s still there after Stop (stat: %v)", dir, err)
		}
	}
}

// TestStartFailureShowsLog checks that a failed start says why (the tail of
// the apiserver's log) and leaves nothing behind.
func TestStartFailureShowsLog(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	runDir := t.TempDir() + "/run"
	cp, err := controlplane.Start(ctx, controlplane.Options{
		RunDir:              runDir,
		ExtraAPIServerFlags: []string{"--no-such-flag=1"},
	})
	if errors.Is(err, controlplane.ErrBinaryMissing) {
		t.Skipf("skipping: %v", err)
	}
	if err == nil {
		_ = cp.Stop()
		t.Fatal("Start succeeded with an unknown apiserver flag")
	}
	t.Logf("expected start error:\n%v", err)
	if !strings.Contains(err.Error(), "unknown flag: --no-such-flag") {
		t.Errorf("error lacks the apiserver's own message:\n%v", err)
	}
	// A given RunDir stays, with the logs; the processes must be gone, so
	// nothing holds etcd's data directory lock any more.
	if _, err := os.Stat(runDir + "/kube-apiserver.log"); err != nil {
		t.Error(err)
	}
	if err := os.RemoveAll(runDir); err != nil {
		t.Error(err)
	}
}

// testApplyStatus shows what probed's status writer relies on: with
// server-side apply on pods/status, status.conditions merges by type, so a
// field manager owns only its own conditions.
func testApplyStatus(ctx context.Context, t *testing.T, client kubernetes.Interface) {
	pods := client.CoreV1().Pods("default")
	now := metav1.Now()
	apply := func(manager string, conds ...*corev1ac.PodConditionApplyConfiguration) {
		t.Helper()
		ac := corev1ac.Pod("app", "default").WithStatus(corev1ac.PodStatus().WithConditions(conds...))
		if _, err := pods.ApplyStatus(ctx, ac, metav1.ApplyOptions{FieldManager: manager, Force: true}); err != nil {
			t.Fatalf("apply status as %s: %v", manager, err)
		}
	}
	cond := func(typ string, status corev1.ConditionStatus, reason string) *corev1ac.PodConditionApplyConfiguration {
		return corev1ac.PodCondition().WithType(corev1.PodConditionType(typ)).WithStatus(status).
			WithReason(reason).WithLastTransitionTime(now)
	}

	apply("kubelet-stand-in", cond(string(corev1.PodReady), corev1.ConditionFalse, "ReadinessGatesNotReady"))
	apply("probed", cond("probed.io/ready", corev1.ConditionTrue, "ProbeSucceeded"),
		cond("ready.probed.io/app", corev1.ConditionTrue, "ProbeSucceeded"))
	got := conditions(ctx, t, client)
	if got["probed.io/ready"] != "True/ProbeSucceeded" || got["ready.probed.io/app"] != "True/ProbeSucceeded" ||
		got[string(corev1.PodReady)] != "False/ReadinessGatesNotReady" {
		t.Fatalf("after both applies: %v", got)
	}

	// probed drops one condition it owns; the other manager's stays.
	apply("probed", cond("probed.io/ready", corev1.ConditionFalse, "ProbeFailed"))
	got = conditions(ctx, t, client)
	if _, ok := got["ready.probed.io/app"]; ok {
		t.Errorf("condition probed no longer applies is still there: %v", got)
	}
	if got["probed.io/ready"] != "False/ProbeFailed" || got[string(corev1.PodReady)] != "False/ReadinessGatesNotReady" {
		t.Errorf("after probed's second apply: %v", got)
	}

	p, err := pods.Get(ctx, "app", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var owned bool
	for _, mf := range p.ManagedFields {
		owned = owned || (mf.Manager == "probed" && mf.Subresource == "status" && mf.Operation == metav1.ManagedFieldsOperationApply)
	}
	if !owned {
		t.Errorf("no managedFields entry for manager probed on status: %+v", p.ManagedFields)
	}
}

// conditions returns default/app's conditions as type -> "Status/Reason".
func conditions(ctx context.Context, t *testing.T, client kubernetes.Interface) map[string]string {
	t.Helper()
	p, err := client.CoreV1().Pods("default").Get(ctx, "app", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	m := map[string]string{}
	for _, c := range p.Status.Conditions {
		m[string(c.Type)] = string(c.Status) + "/" + c.Reason
	}
	return m
}

// configFromKubeconfig reads the harness's kubeconfig back without clientcmd
// (which is not in the daemon's go.mod): enough to prove the file works.
func configFromKubeconfig(t *testing.T, path string) *rest.Config {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var kc clientcmdv1.Config
	if err := json.Unmarshal(b, &kc); err != nil {
		t.Fatal(err)
	}
	if len(kc.Clusters) != 1 || len(kc.AuthInfos) != 1 || kc.CurrentContext == "" {
		t.Fatalf("unexpected kubeconfig: %s", b)
	}
	return &rest.Config{
		Host: kc.Clusters[0].Cluster.Server,
		TLSClientConfig: rest.TLSClientConfig{
			CAData:   kc.Clusters[0].Cluster.CertificateAuthorityData,
			CertData: kc.AuthInfos[0].AuthInfo.ClientCertificateData,
			KeyData:  kc.AuthInfos[0].AuthInfo.ClientKeyData,
		},
	}
}
