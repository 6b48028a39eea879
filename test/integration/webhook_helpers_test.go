//go:build integration

package integration

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
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
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/probed-dev/probed/pkg/probespec"
	"github.com/probed-dev/probed/test/harness/controlplane"
	"github.com/probed-dev/probed/test/harness/manifest"
	"github.com/probed-dev/probed/test/harness/proc"
)

const (
	webhookNS     = "probed-system"
	webhookName   = "probed-webhook" // the Service, the configurations, the ServiceAccount
	webhookSecret = "probed-webhook-certs"
	webhookDir    = "../../deploy/webhook"
)

var (
	webhookBinOnce [2]sync.Once
	webhookBins    [2]string
	webhookBinErrs [2]error
)

// buildWebhook builds cmd/probed-webhook next to the probed binary TestMain
// built (in a directory TestMain removes), as TestMain builds probed.
func buildWebhook(t testing.TB) string {
	return buildWebhookBinary(t, daemonBuild().Race)
}

// buildWebhookBinary builds cmd/probed-webhook, with the race detector or
// without (as it ships, for measurements, which also shares the build cache
// with the images).
func buildWebhookBinary(t testing.TB, race bool) string {
	t.Helper()
	i, name := 0, "probed-webhook"
	if !race {
		i, name = 1, "probed-webhook-norace"
	}
	webhookBinOnce[i].Do(func() {
		webhookBins[i] = filepath.Join(filepath.Dir(probedBin), name)
		webhookBinErrs[i] = proc.Build(context.Background(), webhookBins[i], "./cmd/probed-webhook",
			proc.BuildOptions{Race: race, Shipped: !race})
	})
	if webhookBinErrs[i] != nil {
		t.Fatal(webhookBinErrs[i])
	}
	return webhookBins[i]
}

// webhookManifests decodes every object of deploy/webhook's resources.
func webhookManifests(t testing.TB) []runtime.Object {
	t.Helper()
	var files []string
	for _, f := range []string{"webhook.yaml", "admission.yaml", "ca-bundle.yaml"} {
		files = append(files, filepath.Join(webhookDir, f))
	}
	out, err := manifest.TypedFiles(files...)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// installWebhook applies deploy/webhook for a webhook served on
// 127.0.0.1:port, as shipped but for what only the test knows:
//   - the Service is an ExternalName for 127.0.0.1: the API server runs on
//     this host, and Endpoints may not hold a loopback address. The API
//     server still calls <service>.<namespace>.svc, checking the serving
//     certificate against that name, as in a cluster;
//   - the configurations name port (an ExternalName Service resolves to the
//     port the configuration names);
//   - the Deployment and its budget are the end-to-end tier's.
//
// It leaves everything in place and the Secret empty, and removes the
// configurations and policies when the test ends.
func installWebhook(t *testing.T, port int) {
	t.Helper()
	ctx := context.Background()
	// Its default ServiceAccount too: a test creates pods there.
	if err := cp.EnsureNamespace(ctx, webhookNS); err != nil {
		t.Fatal(err)
	}
	for _, obj := range webhookManifests(t) {
		var err error
		switch o := obj.(type) {
		case *v1.ServiceAccount:
			_, err = client.CoreV1().ServiceAccounts(o.Namespace).Create(ctx, o, metav1.CreateOptions{})
		case *v1.Secret:
			err = client.CoreV1().Secrets(o.Namespace).Delete(ctx, o.Name, metav1.DeleteOptions{})
			if err == nil || apierrors.IsNotFound(err) {
				_, err = client.CoreV1().Secrets(o.Namespace).Create(ctx, o, metav1.CreateOptions{})
			}
		case *rbacv1.Role:
			_, err = client.RbacV1().Roles(o.Namespace).Create(ctx, o, metav1.CreateOptions{})
		case *rbacv1.RoleBinding:
			_, err = client.RbacV1().RoleBindings(o.Namespace).Create(ctx, o, metav1.CreateOptions{})
		case *rbacv1.ClusterRole:
			_, err = client.RbacV1().ClusterRoles().Create(ctx, o, metav1.CreateOptions{})
		case *rbacv1.ClusterRoleBinding:
			_, err = client.RbacV1().ClusterRoleBindings().Create(ctx, o, metav1.CreateOptions{})
		case *v1.Service:
			svc := &v1.Service{ObjectMeta: o.ObjectMeta, Spec: v1.ServiceSpec{Type: v1.ServiceTypeExternalName, ExternalName: "127.0.0.1"}}
			_, err = client.CoreV1().Services(o.Namespace).Create(ctx, svc, metav1.CreateOptions{})
		case *appsv1.Deployment, *policyv1.PodDisruptionBudget:
			continue
		case *admissionv1.MutatingWebhookConfiguration:
			for i := range o.Webhooks {
				o.Webhooks[i].ClientConfig.Service.Port = ptrTo(int32(port))
			}
			replace(t, func() error {
				return client.AdmissionregistrationV1().MutatingWebhookConfigurations().Delete(ctx, o.Name, metav1.DeleteOptions{})
			}, func() error {
				_, err := client.AdmissionregistrationV1().MutatingWebhookConfigurations().Create(ctx, o, metav1.CreateOptions{})
				return err
			})
			t.Cleanup(func() {
				_ = client.AdmissionregistrationV1().MutatingWebhookConfigurations().Delete(ctx, o.Name, metav1.DeleteOptions{})
			})
		case *admissionv1.ValidatingWebhookConfiguration:
			for i := range o.Webhooks {
				o.Webhooks[i].ClientConfig.Service.Port = ptrTo(int32(port))
			}
			replace(t, func() error {
				return client.AdmissionregistrationV1().ValidatingWebhookConfigurations().Delete(ctx, o.Name, metav1.DeleteOptions{})
			}, func() error {
				_, err := client.AdmissionregistrationV1().ValidatingWebhookConfigurations().Create(ctx, o, metav1.CreateOptions{})
				return err
			})
			t.Cleanup(func() {
				_ = client.AdmissionregistrationV1().ValidatingWebhookConfigurations().Delete(ctx, o.Name, metav1.DeleteOptions{})
			})
		case *admissionv1.ValidatingAdmissionPolicy:
			replace(t, func() error {
				return client.AdmissionregistrationV1().ValidatingAdmissionPolicies().Delete(ctx, o.Name, metav1.DeleteOptions{})
			}, func() error {
				_, err := client.AdmissionregistrationV1().ValidatingAdmissionPolicies().Create(ctx, o, metav1.CreateOptions{})
				return err
			})
			t.Cleanup(func() {
				_ = client.AdmissionregistrationV1().ValidatingAdmissionPolicies().Delete(ctx, o.Name, metav1.DeleteOptions{})
			})
		case *admissionv1.ValidatingAdmissionPolicyBinding:
			replace(t, func() error {
				return client.AdmissionregistrationV1().ValidatingAdmissionPolicyBindings().Delete(ctx, o.Name, metav1.DeleteOptions{})
			}, func() error {
				_, err := client.AdmissionregistrationV1().ValidatingAdmissionPolicyBindings().Create(ctx, o, metav1.CreateOptions{})
				return err
			})
			t.Cleanup(func() {
				_ = client.AdmissionregistrationV1().ValidatingAdmissionPolicyBindings().Delete(ctx, o.Name, metav1.DeleteOptions{})
			})
		default:
			t.Fatalf("unexpected %T in %s", obj, webhookDir)
		}
		if err != nil && !apierrors.IsAlreadyExists(err) {
			t.Fatalf("creating %T: %v", obj, err)
		}
	}
}

// replace deletes (if there) and creates.
func replace(t *testing.T, del, create func() error) {
	t.Helper()
	if err := del(); err != nil && !apierrors.IsNotFound(err) {
		t.Fatal(err)
	}
	if err := create(); err != nil {
		t.Fatal(err)
	}
}

// webhookProc is a running probed-webhook.
type webhookProc struct {
	*proc.Daemon
	t                    *testing.T
	port                 int
	health, metrics      string
	kubeconfig, tokenCfg string
}

func freePort(t testing.TB) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

// webhookKubeconfig authenticates as the webhook's service account, so the
// test runs with deploy/'s RBAC, not as an admin.
func webhookKubeconfig(t *testing.T) string {
	t.Helper()
	token, err := cp.TokenFor(context.Background(), webhookNS, webhookName, "probed-webhook-it", "", "")
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "webhook.kubeconfig")
	if err := controlplane.WriteKubeconfig(path, cp.ConfigForToken(token)); err != nil {
		t.Fatal(err)
	}
	return path
}

// startWebhook runs probed-webhook serving on 127.0.0.1:port; the caller
// waits for it (waitReady) as it needs.
func startWebhook(t *testing.T, port int, extra ...string) *webhookProc {
	t.Helper()
	return startWebhookBinary(t, buildWebhook(t), port, extra...)
}

// startWebhookBinary is startWebhook with the binary bin.
func startWebhookBinary(t *testing.T, bin string, port int, extra ...string) *webhookProc {
	t.Helper()
	w := &webhookProc{t: t, port: port,
		health: "127.0.0.1:" + strconv.Itoa(freePort(t)), metrics: "127.0.0.1:" + strconv.Itoa(freePort(t))}
	args := append([]string{
		"--kubeconfig=" + webhookKubeconfig(t),
		"--namespace=" + webhookNS,
		"--bind-address=127.0.0.1:" + strconv.Itoa(port),
		"--health-probe-bind-address=" + w.health,
		"--metrics-bind-address=" + w.metrics,
		"--metrics-secure=false",
		"--cert-check-interval=1s",
		"--ca-propagation=1s",
		"-v=2",
	}, extra...)
	// A race report exits 66: a clean exit on SIGTERM is part of every test.
	w.Daemon = proc.StartDaemon(t, "probed-webhook", bin, args, proc.DaemonOptions{CleanExit: true, TailLines: 150})
	return w
}

// get fetches a path of its health or metrics address.
func (w *webhookProc) get(addr, path string) (int, string) {
	resp, err := http.Get("http://" + addr + path)
	if err != nil {
		return 0, err.Error()
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

func (w *webhookProc) waitReady() {
	w.t.Helper()
	eventually(w.t, "probed-webhook /readyz", 60*time.Second, func() bool {
		if done, err := w.Exited(); done {
			w.t.Fatalf("probed-webhook exited: %v", err)
		}
		code, _ := w.get(w.health, "/readyz")
		return code == http.StatusOK
	})
}

// servingCert is the certificate the webhook serves now, as the API server
// asks for it (by the Service's name).
func (w *webhookProc) servingCert() (*x509.Certificate, error) {
	conn, err := tls.DialWithDialer(&net.Dialer{Timeout: 5 * time.Second}, "tcp", "127.0.0.1:"+strconv.Itoa(w.port),
		&tls.Config{InsecureSkipVerify: true, ServerName: webhookName + "." + webhookNS + ".svc"})
	if err != nil {
		return nil, err
	}
	defer conn.Close()
	return conn.ConnectionState().PeerCertificates[0], nil
}

// caBundles returns the caBundle of every webhook in both configurations.
func caBundles(t *testing.T) [][]byte {
	t.Helper()
	ctx := context.Background()
	m, err := client.AdmissionregistrationV1().MutatingWebhookConfigurations().Get(ctx, webhookName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	v, err := client.AdmissionregistrationV1().ValidatingWebhookConfigurations().Get(ctx, webhookName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var out [][]byte
	for _, h := range m.Webhooks {
		out = append(out, h.ClientConfig.CABundle)
	}
	for _, h := range v.Webhooks {
		out = append(out, h.ClientConfig.CABundle)
	}
	return out
}

// verifies reports whether bundle trusts cert for the Service's name.
func verifies(bundle []byte, cert *x509.Certificate) error {
	roots := x509.NewCertPool()
	if !roots.AppendCertsFromPEM(bundle) {
		return errors.New("no certificate in the bundle")
	}
	_, err := cert.Verify(x509.VerifyOptions{Roots: roots, DNSName: webhookName + "." + webhookNS + ".svc"})
	return err
}

// labelledNamespace creates a namespace labelled probed.io/inject=enabled
// (or not), with the default ServiceAccount pods need (no controller
// manager makes it here).
func labelledNamespace(t *testing.T, name string, labelled bool) string {
	t.Helper()
	ns := &v1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}
	if labelled {
		ns.Labels = map[string]string{probespec.InjectLabel: probespec.InjectEnabled}
	}
	if _, err := client.CoreV1().Namespaces().Create(context.Background(), ns, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	if err := cp.EnsureNamespace(context.Background(), name); err != nil {
		t.Fatal(err)
	}
	return name
}

// probedPod is an ordinary pod with spec probes on a container and a
// sidecar, as a user writes it before adoption.
func probedPod(name string) *v1.Pod {
	always := v1.ContainerRestartPolicyAlways
	exec := func(cmd ...string) *v1.Probe {
		return &v1.Probe{ProbeHandler: v1.ProbeHandler{Exec: &v1.ExecAction{Command: cmd}}}
	}
	return &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: v1.PodSpec{
			InitContainers: []v1.Container{{Name: "proxy", Image: "proxy", RestartPolicy: &always, LivenessProbe: exec("true")}},
			Containers: []v1.Container{{
				Name: "app", Image: "app",
				Ports:          []v1.ContainerPort{{Name: "http", ContainerPort: 8080}},
				LivenessProbe:  exec("cat", "/tmp/healthy"),
				ReadinessProbe: &v1.Probe{ProbeHandler: v1.ProbeHandler{HTTPGet: &v1.HTTPGetAction{Path: "/ready", Port: intstr.FromString("http")}}, PeriodSeconds: 2},
				StartupProbe:   &v1.Probe{ProbeHandler: v1.ProbeHandler{TCPSocket: &v1.TCPSocketAction{Port: intstr.FromInt32(8080)}}, FailureThreshold: 30},
			}},
		},
	}
}

// adopted reports how pod differs from what adoption makes: "" when it
// was adopted.
func adopted(pod *v1.Pod) string {
	var problems []string
	for _, c := range append(append([]v1.Container{}, pod.Spec.InitContainers...), pod.Spec.Containers...) {
		if c.LivenessProbe != nil || c.ReadinessProbe != nil || c.StartupProbe != nil {
			problems = append(problems, "container "+c.Name+" keeps spec probes")
		}
	}
	gate := false
	for _, g := range pod.Spec.ReadinessGates {
		gate = gate || g.ConditionType == probespec.ReadinessGate
	}
	if !gate {
		problems = append(problems, "no probed.io/ready gate")
	}
	if pod.Annotations[probespec.AdoptedAnnotation] == "" {
		problems = append(problems, "no "+probespec.AdoptedAnnotation)
	}
	declared, bad := probespec.DeclaredProbes(pod, probespec.ProbeSourceAnnotation)
	if len(bad) > 0 || len(declared) == 0 {
		problems = append(problems, fmt.Sprintf("the annotation declares %d probes, problems %v", len(declared), bad))
	}
	return strings.Join(problems, "; ")
}

// untouched reports how pod differs from what it was created as: "" when
// the webhook left it alone.
func untouched(pod *v1.Pod) string {
	var problems []string
	if pod.Spec.Containers[0].ReadinessProbe == nil {
		problems = append(problems, "the spec probes are gone")
	}
	if _, ok := pod.Annotations[probespec.AdoptedAnnotation]; ok {
		problems = append(problems, "it has "+probespec.AdoptedAnnotation)
	}
	if len(pod.Spec.ReadinessGates) > 0 {
		problems = append(problems, "it has a readiness gate")
	}
	return strings.Join(problems, "; ")
}

// warnings collects the API server's warnings to one client.
type warnings struct {
	mu   sync.Mutex
	msgs []string
}

func (w *warnings) HandleWarningHeader(code int, agent, text string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.msgs = append(w.msgs, text)
}

func (w *warnings) take() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	out := w.msgs
	w.msgs = nil
	return out
}

// warningClient is an admin client whose warnings w collects.
func warningClient(t *testing.T, w *warnings) kubernetes.Interface {
	t.Helper()
	cfg := rest.CopyConfig(cp.RESTConfig())
	cfg.WarningHandler = w
	c, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return c
}
