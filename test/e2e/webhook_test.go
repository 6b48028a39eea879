//go:build e2e

package e2e

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	admissionv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/rest"

	"github.com/probed-dev/probed/pkg/probespec"
	"github.com/probed-dev/probed/test/harness/manifest"
)

// TestWebhook deploys the adoption webhook (its image, from deploy/webhook,
// running on the node) once, and runs the scenarios that go through it in
// parallel, each in a namespace of its own labelled probed.io/inject=enabled.
func TestWebhook(t *testing.T) {
	t.Parallel()
	deployWebhook(t, context.Background())
	for _, sn := range []struct {
		name string
		run  func(t *testing.T, ctx context.Context, ns string)
	}{
		{"adopted-deployment-probed-by-probed-only", testAdoptedDeploymentProbedByProbedOnly},
		{"onfailure-job-liveness-stays-with-kubelet", testOnFailureJobThroughWebhook},
		{"sidecar-startup-probe-orders-start-up", testSidecarStartupThroughWebhook},
		{"refused-host-stays-with-kubelet", testRefusedHostThroughWebhook},
	} {
		t.Run(sn.name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			sn.run(t, ctx, injectedNamespace(t, ctx, sn.name))
		})
	}
}

// injectedNamespace creates a namespace labelled probed.io/inject=enabled,
// deleted when the test ends.
func injectedNamespace(t *testing.T, ctx context.Context, name string) string {
	t.Helper()
	ns := "wh-" + name
	if len(ns) > 63 {
		ns = strings.TrimRight(ns[:63], "-")
	}
	if err := createNamespace(ctx, ns); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = client.CoreV1().Namespaces().Delete(context.Background(), ns, metav1.DeleteOptions{}) })
	if _, err := client.CoreV1().Namespaces().Patch(ctx, ns, "application/merge-patch+json",
		[]byte(`{"metadata":{"labels":{"probed.io/inject":"enabled"}}}`), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	return ns
}

// An ordinary Deployment, with spec probes, in a namespace labelled
// probed.io/inject=enabled, is probed by probed alone: the webhook adopts
// the pod; the kubelet's own prober_probe_total for it stays 0 while it
// counts the webhook pod's own spec probes; the startup probe holds
// readiness back, the readiness probe gates Ready through probed.io/ready,
// and a failing liveness probe restarts the container once.
func testAdoptedDeploymentProbedByProbedOnly(t *testing.T, ctx context.Context, ns string) {

	// Started after 6 s; alive and ready from then; on its first run only
	// (the emptyDir remembers), it stops being alive 10 s later.
	script := `if [ ! -f /data/ran ]; then touch /data/ran; first=1; fi
sleep 6; touch /tmp/started /tmp/alive /tmp/ready
if [ -n "$first" ]; then sleep 10; rm /tmp/alive; fi
exec sleep 3600`
	exec := func(period, failures int32, cmd ...string) *v1.Probe {
		return &v1.Probe{ProbeHandler: execHandler(cmd...), PeriodSeconds: period, FailureThreshold: failures}
	}
	labels := map[string]string{"app": "web"}
	dep := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: "web"},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr(int32(1)),
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: v1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: v1.PodSpec{
					TerminationGracePeriodSeconds: ptr(int64(1)),
					Volumes:                       []v1.Volume{{Name: "data", VolumeSource: v1.VolumeSource{EmptyDir: &v1.EmptyDirVolumeSource{}}}},
					Containers: []v1.Container{{
						Name: "app", Image: imgBusybox, ImagePullPolicy: v1.PullNever,
						Command:        []string{"sh", "-c", script},
						VolumeMounts:   []v1.VolumeMount{{Name: "data", MountPath: "/data"}},
						StartupProbe:   exec(1, 30, "cat", "/tmp/started"),
						ReadinessProbe: exec(1, 1, "cat", "/tmp/ready"),
						LivenessProbe:  exec(1, 2, "cat", "/tmp/alive"),
					}},
				},
			},
		},
	}
	if _, err := client.AppsV1().Deployments(ns).Create(ctx, dep, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	// The pod, as the ReplicaSet controller created it through the webhook.
	var pod *v1.Pod
	pollE2E(t, "the Deployment's pod", 2*time.Minute, func() bool {
		pods, err := client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: "app=web"})
		if err != nil || len(pods.Items) != 1 {
			return false
		}
		pod = &pods.Items[0]
		return true
	})
	c := pod.Spec.Containers[0]
	if c.LivenessProbe != nil || c.ReadinessProbe != nil || c.StartupProbe != nil {
		t.Fatalf("the pod keeps spec probes: the webhook did not adopt it\n%v", pod.Spec.Containers[0])
	}
	if pod.Annotations[probespec.AdoptedAnnotation] != "app/livenessProbe,app/readinessProbe,app/startupProbe" {
		t.Errorf("%s = %q", probespec.AdoptedAnnotation, pod.Annotations[probespec.AdoptedAnnotation])
	}
	if len(pod.Spec.ReadinessGates) != 1 || pod.Spec.ReadinessGates[0].ConditionType != probespec.ReadinessGate {
		t.Errorf("readiness gates %v, want probed.io/ready", pod.Spec.ReadinessGates)
	}

	// Startup gating, then readiness, then one liveness restart, then ready
	// again; never Ready before probed says the container started.
	var sawUnstarted, restarted bool
	pollE2E(t, "started, Ready, restarted once by liveness, Ready again", 3*time.Minute, func() bool {
		p, err := client.CoreV1().Pods(ns).Get(ctx, pod.Name, metav1.GetOptions{})
		if err != nil {
			return false
		}
		started := condStatus(p, "started.probed.io/app") == v1.ConditionTrue
		if !started && len(p.Status.ContainerStatuses) > 0 && p.Status.ContainerStatuses[0].State.Running != nil {
			sawUnstarted = true
			if isReady(p) {
				t.Errorf("Ready before the startup probe succeeded: %v", p.Status.Conditions)
			}
		}
		var restarts int32
		if len(p.Status.ContainerStatuses) > 0 {
			restarts = p.Status.ContainerStatuses[0].RestartCount
		}
		if restarts > 1 {
			t.Fatalf("restarted %d times, want once", restarts)
		}
		restarted = restarts == 1
		return restarted && started && isReady(p)
	})
	if !sawUnstarted {
		t.Error("never saw the container running and not yet started: startup gating unobserved")
	}
	var reasons []string
	events, _ := client.CoreV1().Events(ns).List(ctx, metav1.ListOptions{FieldSelector: "involvedObject.uid=" + string(pod.UID)})
	for _, e := range events.Items {
		if e.Source.Component == "probed" {
			reasons = append(reasons, e.Reason)
		}
	}
	if !strings.Contains(strings.Join(reasons, ","), "Unhealthy") {
		t.Errorf("probed's events for the pod %v, want Unhealthy (the liveness failure)", reasons)
	}

	// probed probed it; the kubelet did not.
	if n := scrape(t, `prober_probe_total{container="app",namespace="`+ns+`",pod="`+pod.Name+`"`); n == 0 {
		t.Error("probed's prober_probe_total for the pod is 0")
	}
	kubelet := kubeletProbeTotals(t, ctx)
	if n := kubelet[ns+"/"+pod.Name]; n != 0 {
		t.Errorf("the kubelet's prober_probe_total for the adopted pod is %v, want 0", n)
	}
	var webhookProbes float64
	for k, v := range kubelet {
		if strings.HasPrefix(k, nd.ProbedNamespace()+"/probed-webhook-") {
			webhookProbes += v
		}
	}
	if webhookProbes == 0 {
		t.Errorf("the kubelet's /metrics/probes counts no probe of the webhook's own pod either: is it read at all? %v", kubelet)
	}
}

// kubeletProbeTotals sums the kubelet's prober_probe_total by
// "namespace/pod", read from its /metrics/probes. Straight from the kubelet,
// with the admin's client certificate (the kubelet trusts the cluster CA):
// the API server's node proxy refuses a node whose address is loopback.
func kubeletProbeTotals(t *testing.T, ctx context.Context) map[string]float64 {
	t.Helper()
	node, err := client.CoreV1().Nodes().Get(ctx, nd.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	tlsCfg, err := rest.TLSConfigFor(nd.RESTConfig())
	if err != nil {
		t.Fatal(err)
	}
	tlsCfg.InsecureSkipVerify = true // the kubelet's self-signed serving certificate
	hc := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: tlsCfg}}
	u := fmt.Sprintf("https://127.0.0.1:%d/metrics/probes", node.Status.DaemonEndpoints.KubeletEndpoint.Port)
	resp, err := hc.Get(u)
	if err != nil {
		t.Fatalf("the kubelet's /metrics/probes: %v", err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("the kubelet's %s: %d %v\n%s", u, resp.StatusCode, err, body)
	}
	out := map[string]float64{}
	sc := bufio.NewScanner(bytes.NewReader(body))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		l := sc.Text()
		if !strings.HasPrefix(l, "prober_probe_total{") {
			continue
		}
		f := strings.Fields(l)
		v, err := strconv.ParseFloat(f[len(f)-1], 64)
		if err != nil {
			continue
		}
		out[label(l, "namespace")+"/"+label(l, "pod")] += v
	}
	return out
}

// label returns a label's value in a Prometheus text line.
func label(line, name string) string {
	_, rest, ok := strings.Cut(line, name+`="`)
	if !ok {
		return ""
	}
	v, _, _ := strings.Cut(rest, `"`)
	return v
}

func pollE2E(t *testing.T, what string, timeout time.Duration, cond func() bool) {
	t.Helper()
	if err := wait.PollUntilContextTimeout(context.Background(), 500*time.Millisecond, timeout, true,
		func(context.Context) (bool, error) { return cond(), nil }); err != nil {
		t.Fatalf("waiting for %s: %v", what, err)
	}
}

// deployWebhook runs deploy/webhook on the node with its image, as shipped
// but for what only this node needs: the node has no kube-proxy and its
// API server listens on loopback only, so the webhook's pod uses the host
// network (one replica then, its ports on loopback), reaches the API server
// on 127.0.0.1, and the Service is an ExternalName for 127.0.0.1 that the
// configurations call on the webhook's port. The API server still checks
// the certificate the webhook made for probed-webhook.probed-system.svc.
// Everything is removed when the test ends.
func deployWebhook(t *testing.T, ctx context.Context) {
	t.Helper()
	if err := nd.ImportImage(ctx, filepath.Join(repoRoot, ".cache/images/probed-webhook.tar")); err != nil {
		t.Fatalf("importing the webhook's image (hack/build-probed-image.sh builds it): %v", err)
	}
	apiURL, err := url.Parse(nd.RESTConfig().Host)
	if err != nil {
		t.Fatal(err)
	}
	port, metricsPort, healthPort := freeTCPPort(t), freeTCPPort(t), freeTCPPort(t)
	var cleanups []func() error
	t.Cleanup(func() {
		for i := len(cleanups) - 1; i >= 0; i-- {
			if err := cleanups[i](); err != nil && !apierrors.IsNotFound(err) {
				t.Logf("cleanup: %v", err)
			}
		}
	})
	var dep *appsv1.Deployment
	for _, obj := range decodeDir(t, filepath.Join(repoRoot, "deploy/webhook"), "webhook.yaml", "admission.yaml", "ca-bundle.yaml") {
		var err error
		bg := context.Background()
		switch o := obj.(type) {
		case *v1.ServiceAccount:
			_, err = client.CoreV1().ServiceAccounts(o.Namespace).Create(ctx, o, metav1.CreateOptions{})
			cleanups = append(cleanups, func() error {
				return client.CoreV1().ServiceAccounts(o.Namespace).Delete(bg, o.Name, metav1.DeleteOptions{})
			})
		case *v1.Secret:
			_, err = client.CoreV1().Secrets(o.Namespace).Create(ctx, o, metav1.CreateOptions{})
			cleanups = append(cleanups, func() error { return client.CoreV1().Secrets(o.Namespace).Delete(bg, o.Name, metav1.DeleteOptions{}) })
		case *rbacv1.Role:
			_, err = client.RbacV1().Roles(o.Namespace).Create(ctx, o, metav1.CreateOptions{})
			cleanups = append(cleanups, func() error { return client.RbacV1().Roles(o.Namespace).Delete(bg, o.Name, metav1.DeleteOptions{}) })
		case *rbacv1.RoleBinding:
			_, err = client.RbacV1().RoleBindings(o.Namespace).Create(ctx, o, metav1.CreateOptions{})
			cleanups = append(cleanups, func() error {
				return client.RbacV1().RoleBindings(o.Namespace).Delete(bg, o.Name, metav1.DeleteOptions{})
			})
		case *rbacv1.ClusterRole:
			_, err = client.RbacV1().ClusterRoles().Create(ctx, o, metav1.CreateOptions{})
			cleanups = append(cleanups, func() error { return client.RbacV1().ClusterRoles().Delete(bg, o.Name, metav1.DeleteOptions{}) })
		case *rbacv1.ClusterRoleBinding:
			_, err = client.RbacV1().ClusterRoleBindings().Create(ctx, o, metav1.CreateOptions{})
			cleanups = append(cleanups, func() error { return client.RbacV1().ClusterRoleBindings().Delete(bg, o.Name, metav1.DeleteOptions{}) })
		case *v1.Service:
			svc := &v1.Service{ObjectMeta: o.ObjectMeta, Spec: v1.ServiceSpec{Type: v1.ServiceTypeExternalName, ExternalName: "127.0.0.1"}}
			_, err = client.CoreV1().Services(o.Namespace).Create(ctx, svc, metav1.CreateOptions{})
			cleanups = append(cleanups, func() error { return client.CoreV1().Services(o.Namespace).Delete(bg, o.Name, metav1.DeleteOptions{}) })
		case *appsv1.Deployment:
			dep = o
			o.Spec.Replicas = ptr(int32(1))
			s := &o.Spec.Template.Spec
			s.HostNetwork = true
			s.Affinity = nil
			ct := &s.Containers[0]
			ct.Args = []string{"--bind-address=127.0.0.1:" + strconv.Itoa(port),
				"--metrics-bind-address=127.0.0.1:" + strconv.Itoa(metricsPort),
				"--health-probe-bind-address=127.0.0.1:" + strconv.Itoa(healthPort), "-v=2"}
			for i := range ct.Ports {
				switch ct.Ports[i].Name {
				case "webhook":
					ct.Ports[i].ContainerPort = int32(port)
				case "metrics":
					ct.Ports[i].ContainerPort = int32(metricsPort)
				case "health":
					ct.Ports[i].ContainerPort = int32(healthPort)
				}
			}
			ct.Env = append(ct.Env, v1.EnvVar{Name: "KUBERNETES_SERVICE_HOST", Value: apiURL.Hostname()},
				v1.EnvVar{Name: "KUBERNETES_SERVICE_PORT", Value: apiURL.Port()})
			_, err = client.AppsV1().Deployments(o.Namespace).Create(ctx, o, metav1.CreateOptions{})
			cleanups = append(cleanups, func() error {
				return client.AppsV1().Deployments(o.Namespace).Delete(bg, o.Name, metav1.DeleteOptions{PropagationPolicy: ptr(metav1.DeletePropagationForeground)})
			})
		case *policyv1.PodDisruptionBudget:
			_, err = client.PolicyV1().PodDisruptionBudgets(o.Namespace).Create(ctx, o, metav1.CreateOptions{})
			cleanups = append(cleanups, func() error {
				return client.PolicyV1().PodDisruptionBudgets(o.Namespace).Delete(bg, o.Name, metav1.DeleteOptions{})
			})
		case *admissionv1.MutatingWebhookConfiguration:
			for i := range o.Webhooks {
				o.Webhooks[i].ClientConfig.Service.Port = ptr(int32(port))
			}
			_, err = client.AdmissionregistrationV1().MutatingWebhookConfigurations().Create(ctx, o, metav1.CreateOptions{})
			cleanups = append(cleanups, func() error {
				return client.AdmissionregistrationV1().MutatingWebhookConfigurations().Delete(bg, o.Name, metav1.DeleteOptions{})
			})
		case *admissionv1.ValidatingWebhookConfiguration:
			for i := range o.Webhooks {
				o.Webhooks[i].ClientConfig.Service.Port = ptr(int32(port))
			}
			_, err = client.AdmissionregistrationV1().ValidatingWebhookConfigurations().Create(ctx, o, metav1.CreateOptions{})
			cleanups = append(cleanups, func() error {
				return client.AdmissionregistrationV1().ValidatingWebhookConfigurations().Delete(bg, o.Name, metav1.DeleteOptions{})
			})
		case *admissionv1.ValidatingAdmissionPolicy:
			_, err = client.AdmissionregistrationV1().ValidatingAdmissionPolicies().Create(ctx, o, metav1.CreateOptions{})
			cleanups = append(cleanups, func() error {
				return client.AdmissionregistrationV1().ValidatingAdmissionPolicies().Delete(bg, o.Name, metav1.DeleteOptions{})
			})
		case *admissionv1.ValidatingAdmissionPolicyBinding:
			_, err = client.AdmissionregistrationV1().ValidatingAdmissionPolicyBindings().Create(ctx, o, metav1.CreateOptions{})
			cleanups = append(cleanups, func() error {
				return client.AdmissionregistrationV1().ValidatingAdmissionPolicyBindings().Delete(bg, o.Name, metav1.DeleteOptions{})
			})
		default:
			t.Fatalf("unexpected %T in deploy/webhook", obj)
		}
		if err != nil {
			t.Fatalf("creating %T: %v", obj, err)
		}
	}
	if dep == nil {
		t.Fatal("no Deployment in deploy/webhook")
	}
	start := time.Now()
	pollE2E(t, "the webhook's Deployment available (its /readyz: serving a certificate its configurations trust)", 2*time.Minute, func() bool {
		d, err := client.AppsV1().Deployments(dep.Namespace).Get(ctx, dep.Name, metav1.GetOptions{})
		return err == nil && d.Status.ObservedGeneration >= d.Generation && d.Status.AvailableReplicas == 1
	})
	logf("probed-webhook available in %v", time.Since(start).Round(time.Millisecond))
}

// decodeDir decodes the named YAML files of dir into typed objects.
func decodeDir(t *testing.T, dir string, files ...string) []runtime.Object {
	t.Helper()
	paths := make([]string, len(files))
	for i, f := range files {
		paths[i] = filepath.Join(dir, f)
	}
	out, err := manifest.TypedFiles(paths...)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func freeTCPPort(t *testing.T) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}
