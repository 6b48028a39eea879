//go:build integration

package integration

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	certutil "k8s.io/client-go/util/cert"

	"github.com/probed-dev/probed/pkg/probespec"
)

// The real webhook binary, registered through deploy/webhook's own
// configurations and reached by the real API server over real TLS with the
// certificate it made itself, adopts exactly the pods in scope.
func TestWebhookAdoptsPodsInScope(t *testing.T) {
	port := freePort(t)
	installWebhook(t, port)
	w := startWebhook(t, port)
	w.waitReady()
	ctx := context.Background()
	labelled := labelledNamespace(t, "wh-adopt-on", true)
	plain := labelledNamespace(t, "wh-adopt-off", false)
	kubeSystem := labelledNamespace(t, "kube-system", false)

	// Not a bare pod: what a ReplicaSet controller sends.
	owned := probedPod("")
	owned.GenerateName = "web-7d9f-"
	owned.OwnerReferences = []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: "web-7d9f", UID: "1", Controller: ptrTo(true)}}
	pod := func(name string, mutate func(*v1.Pod)) *v1.Pod {
		p := probedPod(name)
		if mutate != nil {
			mutate(p)
		}
		return p
	}
	for _, tc := range []struct {
		name  string
		ns    string
		pod   *v1.Pod
		adopt bool
	}{
		{"labelled namespace", labelled, pod("bare", nil), true},
		{"labelled namespace, controller's pod", labelled, owned, true},
		{"labelled pod elsewhere", plain, pod("labelled", func(p *v1.Pod) {
			p.Labels = map[string]string{probespec.InjectLabel: probespec.InjectEnabled}
		}), true},
		{"neither", plain, pod("neither", nil), false},
		{"opted out", labelled, pod("opted-out", func(p *v1.Pod) {
			p.Annotations = map[string]string{probespec.InjectAnnotation: "false"}
		}), false},
		{"probed's own pod", labelled, pod("own", func(p *v1.Pod) {
			p.Labels = map[string]string{"app.kubernetes.io/name": "probed"}
		}), false},
		{"probed's namespace, labelled pod", webhookNS, pod("in-probed-system", func(p *v1.Pod) {
			p.Labels = map[string]string{probespec.InjectLabel: probespec.InjectEnabled}
		}), false},
		{"kube-system, labelled pod", kubeSystem, pod("in-kube-system", func(p *v1.Pod) {
			p.Labels = map[string]string{probespec.InjectLabel: probespec.InjectEnabled}
		}), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			created, err := client.CoreV1().Pods(tc.ns).Create(ctx, tc.pod, metav1.CreateOptions{})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = client.CoreV1().Pods(tc.ns).Delete(ctx, created.Name, metav1.DeleteOptions{}) })
			if tc.adopt {
				if why := adopted(created); why != "" {
					t.Errorf("pod %s/%s not adopted: %s\n%s", tc.ns, created.Name, why, mustJSON(created))
				}
				// What the user's spec said is what probed now runs.
				var entries map[string]map[string]json.RawMessage
				if err := json.Unmarshal([]byte(created.Annotations[probespec.ProbesAnnotation]), &entries); err != nil {
					t.Fatal(err)
				}
				if len(entries["app"]) != 3 || len(entries["proxy"]) != 1 {
					t.Errorf("annotation %s, want app's three probes and proxy's one", created.Annotations[probespec.ProbesAnnotation])
				}
			} else if why := untouched(created); why != "" {
				t.Errorf("pod %s/%s changed: %s", tc.ns, created.Name, why)
			}
		})
	}

	// Idempotent: a pod that is already what adoption makes (a re-invocation
	// sees that) goes through unchanged, and the webhook says so.
	first, err := client.CoreV1().Pods(labelled).Create(ctx, probedPod("first"), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	again := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "again", Labels: first.Labels, Annotations: first.Annotations}, Spec: *first.Spec.DeepCopy()}
	again.Spec.NodeName = ""
	second, err := client.CoreV1().Pods(labelled).Create(ctx, again, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if !maps.Equal(second.Annotations, first.Annotations) || !equality.Semantic.DeepEqual(second.Spec, first.Spec) {
		t.Errorf("adopting an adopted pod changed it:\nfirst  %s\nsecond %s", mustJSON(first), mustJSON(second))
	}
	// Unchanged: the pod created adopted, and each adopted pod once more:
	// /approve-reach, called after adoption, approved it, and the API
	// server re-invokes adoption after a later webhook's change.
	if code, body := w.get(w.metrics, "/metrics"); code != http.StatusOK ||
		!strings.Contains(body, `probed_webhook_admissions_total{outcome="adopted",webhook="adopt"} 4`) ||
		!strings.Contains(body, `probed_webhook_admissions_total{outcome="unchanged",webhook="adopt"} 5`) {
		t.Errorf("/metrics %d, want 4 adoptions and 5 unchanged counted:\n%s", code, grep(body, "probed_webhook_admissions_total"))
	}
}

// An annotation the daemon would report as InvalidProbe fails the create,
// with the daemon's words; a probed readiness probe without the gate gets a
// warning from the ValidatingAdmissionPolicy alone.
func TestWebhookRefusesInvalidAnnotations(t *testing.T) {
	port := freePort(t)
	installWebhook(t, port)
	w := startWebhook(t, port)
	w.waitReady()
	ctx := context.Background()
	labelled := labelledNamespace(t, "wh-validate-on", true)
	plain := labelledNamespace(t, "wh-validate-off", false)

	daemonSays := func(p *v1.Pod) []string {
		_, problems := probespec.DeclaredProbes(p, probespec.ProbeSourceAnnotation)
		if len(problems) == 0 {
			t.Fatal("the daemon finds nothing wrong: a bad test case")
		}
		var out []string
		for _, pr := range problems {
			out = append(out, pr.String())
		}
		return out
	}
	annotated := func(name, annotation string) *v1.Pod {
		p := probedPod(name)
		p.Annotations = map[string]string{probespec.ProbesAnnotation: annotation}
		return p
	}
	for _, tc := range []struct{ name, annotation string }{
		{"malformed", `{"app": {"readinessProbe": {"perodSeconds": 2}}}`},
		{"bad port", `{"app": {"readinessProbe": {"httpGet": {"port": "metrics"}}}}`},
		{"unknown container", `{"db": {"livenessProbe": {"exec": {"command": ["true"]}}}}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := annotated("invalid", tc.annotation)
			// What the daemon would say of the pod as it reaches the node:
			// adopted (spec probes moved in beside the user's entries).
			reached := p.DeepCopy()
			if _, err := probespec.Adopt(&reached.ObjectMeta, &reached.Spec); err != nil {
				reached = p
			}
			_, err := client.CoreV1().Pods(labelled).Create(ctx, p, metav1.CreateOptions{})
			if err == nil {
				t.Fatal("created")
			}
			if !apierrors.IsInvalid(err) {
				t.Errorf("error %v (%T), want 422 Invalid", err, err)
			}
			for _, msg := range daemonSays(reached) {
				if !strings.Contains(err.Error(), msg) {
					t.Errorf("error %q\nlacks the daemon's %q", err, msg)
				}
			}
		})
	}

	// A Deployment's template is judged at `kubectl apply`.
	bad := annotated("", `{"app": {"readinessProbe": {"httpGet": {"port": "metrics"}}}}`)
	bad.Labels = map[string]string{"app": "web"}
	dep := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: "web"},
		Spec: appsv1.DeploymentSpec{
			Selector: &metav1.LabelSelector{MatchLabels: bad.Labels},
			Template: v1.PodTemplateSpec{ObjectMeta: bad.ObjectMeta, Spec: bad.Spec},
		},
	}
	_, err := client.AppsV1().Deployments(labelled).Create(ctx, dep, metav1.CreateOptions{})
	if err == nil || !strings.Contains(err.Error(), "spec.template: "+daemonSays(bad)[0]) {
		t.Errorf("Deployment with an invalid template: %v, want refused with %q", err, "spec.template: "+daemonSays(bad)[0])
	}
	// Out of scope, the same Deployment goes through (and the daemon will
	// report it, as before).
	if _, err := client.AppsV1().Deployments(plain).Create(ctx, dep, metav1.CreateOptions{}); err != nil {
		t.Errorf("out of scope: %v", err)
	}

	// Editing a live pod's annotation into something invalid is refused;
	// updating an invalid pod admitted before the webhook is not.
	good := annotated("live", `{"app": {"readinessProbe": {"httpGet": {"port": "http"}}}}`)
	live, err := client.CoreV1().Pods(labelled).Create(ctx, good, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	patch := fmt.Sprintf(`{"metadata":{"annotations":{%q:%q}}}`, probespec.ProbesAnnotation, `{"app": {"readinessProbe": {"httpGet": {"port": 0}}}}`)
	if _, err := client.CoreV1().Pods(labelled).Patch(ctx, live.Name, types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err == nil || !apierrors.IsInvalid(err) {
		t.Errorf("an invalid edit of the annotation: %v, want refused", err)
	}
	w.Shutdown()
	old, err := client.CoreV1().Pods(labelled).Create(ctx, annotated("before-webhook", `{"db": {}}`), metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("with the webhook down (failing open): %v", err)
	}
	w2 := startWebhook(t, port)
	w2.waitReady()
	if _, err := client.CoreV1().Pods(labelled).Patch(ctx, old.Name, types.MergePatchType, []byte(`{"metadata":{"labels":{"x":"y"}}}`), metav1.PatchOptions{}); err != nil {
		t.Errorf("relabelling a pod admitted before the webhook: %v", err)
	}

	// The missing-gate warning, from CEL: where nothing adopts the pod.
	var ws warnings
	wc := warningClient(t, &ws)
	nogate := annotated("no-gate", `{"app": {"readinessProbe": {"httpGet": {"port": "http"}}}}`)
	if _, err := wc.CoreV1().Pods(plain).Create(ctx, nogate, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if got := ws.take(); len(got) != 1 || !strings.Contains(got[0], "spec.readinessGates has no probed.io/ready") {
		t.Errorf("warnings %q, want the missing-gate warning", got)
	}
	yamlNoGate := annotated("yaml-no-gate", "app:\n  startupProbe:\n    tcpSocket: {port: 8080}\n")
	if _, err := wc.CoreV1().Pods(plain).Create(ctx, yamlNoGate, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if got := ws.take(); len(got) != 1 {
		t.Errorf("warnings %q for a YAML startup probe without the gate, want one", got)
	}
	livenessOnly := annotated("liveness-only", `{"app": {"livenessProbe": {"httpGet": {"port": "http"}}}}`)
	if _, err := wc.CoreV1().Pods(plain).Create(ctx, livenessOnly, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if got := ws.take(); len(got) != 0 {
		t.Errorf("warnings %q for a liveness probe alone, want none", got)
	}
	// In scope, adoption adds the gate first: no warning.
	if _, err := wc.CoreV1().Pods(labelled).Create(ctx, annotated("adopted-gate", `{"app": {"readinessProbe": {"httpGet": {"port": "http"}}}}`), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if got := ws.take(); len(got) != 0 {
		t.Errorf("warnings %q for an adopted pod, want none", got)
	}
	// A workload's template, where kubectl apply shows it.
	tmpl := dep.DeepCopy()
	tmpl.Name = "web-no-gate"
	tmpl.Spec.Template.Annotations = nogate.Annotations
	if _, err := wc.AppsV1().Deployments(plain).Create(ctx, tmpl, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if got := ws.take(); len(got) != 1 || !strings.Contains(got[0], "the pod template: ") {
		t.Errorf("warnings %q for a Deployment without the gate, want the template warning", got)
	}
}

// With the webhook down, pods are created as written: the configurations
// fail open, and the kubelet runs the spec probes.
func TestWebhookDownPodsUnchanged(t *testing.T) {
	port := freePort(t)
	installWebhook(t, port)
	w := startWebhook(t, port)
	w.waitReady()
	ctx := context.Background()
	ns := labelledNamespace(t, "wh-down", true)
	up, err := client.CoreV1().Pods(ns).Create(ctx, probedPod("while-up"), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if why := adopted(up); why != "" {
		t.Fatalf("not adopted while the webhook is up: %s", why)
	}
	w.Shutdown()
	for i := range 3 {
		down, err := client.CoreV1().Pods(ns).Create(ctx, probedPod(fmt.Sprintf("while-down-%d", i)), metav1.CreateOptions{})
		if err != nil {
			t.Fatalf("creating a pod with the webhook down: %v", err)
		}
		if why := untouched(down); why != "" {
			t.Errorf("pod created with the webhook down changed: %s", why)
		}
	}
}

// The certificates rotate while pods are created: serving certificates
// every few seconds and the CA once, and not one admission fails.
func TestWebhookCertificateRotation(t *testing.T) {
	port := freePort(t)
	installWebhook(t, port)
	w := startWebhook(t, port, "--cert-validity=12s", "--ca-validity=45s", "--ca-propagation=2s")
	w.waitReady()
	ctx := context.Background()
	ns := labelledNamespace(t, "wh-rotate", true)

	failOpenBefore := failOpenCount(t)
	serials, cas := map[string]bool{}, map[string]bool{}
	var created, failed atomic.Int64
	var failures sync.Map
	stop := make(chan struct{})
	var wg sync.WaitGroup
	// Two creators, so requests are in flight while certificates change.
	for c := range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				p, err := client.CoreV1().Pods(ns).Create(ctx, probedPod(fmt.Sprintf("p%d-%d", c, i)), metav1.CreateOptions{})
				created.Add(1)
				if err != nil {
					failed.Add(1)
					failures.Store(err.Error(), true)
				} else if why := adopted(p); why != "" {
					failed.Add(1)
					failures.Store(p.Name+": "+why, true)
				}
				time.Sleep(100 * time.Millisecond)
			}
		}()
	}
	deadline := time.Now().Add(60 * time.Second)
	for time.Now().Before(deadline) && (len(cas) < 2 || len(serials) < 4) {
		if c, err := w.servingCert(); err == nil {
			serials[c.SerialNumber.String()] = true
			cas[c.Issuer.CommonName] = true
		}
		time.Sleep(250 * time.Millisecond)
	}
	// Carry on past the last change, through a propagation wait.
	time.Sleep(5 * time.Second)
	close(stop)
	wg.Wait()
	t.Logf("%d pods created through %d serving certificates of %d CAs", created.Load(), len(serials), len(cas))
	if len(cas) < 2 || len(serials) < 4 {
		t.Errorf("saw %d serving certificates from %d CAs, want a CA rotation and several certificate rotations", len(serials), len(cas))
	}
	if n := failed.Load(); n > 0 {
		failures.Range(func(k, _ any) bool { t.Errorf("failed admission: %v", k); return true })
		t.Errorf("%d of %d pod creations failed or were not adopted during rotation", n, created.Load())
	}
	if after := failOpenCount(t); after != failOpenBefore {
		t.Errorf("the API server failed open %v times (apiserver_admission_webhook_fail_open_count), want none", after-failOpenBefore)
	}
	// The trust chain in place at the end is the Secret's.
	s, err := client.CoreV1().Secrets(webhookNS).Get(ctx, webhookSecret, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	bundle, err := certutil.ParseCertsPEM(s.Data["ca.crt"])
	if err != nil || len(bundle) != 2 {
		t.Errorf("the Secret's bundle holds %d CAs (%v), want the new one and the one before", len(bundle), err)
	}
	for _, b := range caBundles(t) {
		if string(b) != string(s.Data["ca.crt"]) {
			t.Error("a webhook's caBundle is not the Secret's")
		}
	}
}

// failOpenCount sums the API server's count of webhook calls it let through
// after a failure.
func failOpenCount(t *testing.T) float64 {
	t.Helper()
	body, err := client.CoreV1().RESTClient().Get().AbsPath("/metrics").DoRaw(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	var sum float64
	for _, l := range strings.Split(string(body), "\n") {
		if strings.HasPrefix(l, "apiserver_admission_webhook_fail_open_count{") && strings.Contains(l, "probed.io") {
			var v float64
			if _, err := fmt.Sscan(l[strings.LastIndexByte(l, ' ')+1:], &v); err == nil {
				sum += v
			}
		}
	}
	return sum
}

// Two replicas started together on an empty Secret settle on one CA and
// one certificate, which the configurations trust.
func TestWebhookReplicasShareOneCertificate(t *testing.T) {
	port := freePort(t)
	installWebhook(t, port)
	a := startWebhook(t, port)
	b := startWebhook(t, freePort(t))
	a.waitReady()
	b.waitReady()
	ca, err := a.servingCert()
	if err != nil {
		t.Fatal(err)
	}
	cb, err := b.servingCert()
	if err != nil {
		t.Fatal(err)
	}
	if ca.SerialNumber.Cmp(cb.SerialNumber) != 0 {
		t.Errorf("the replicas serve different certificates: %x and %x", ca.SerialNumber, cb.SerialNumber)
	}
	s, err := client.CoreV1().Secrets(webhookNS).Get(context.Background(), webhookSecret, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if cas, err := certutil.ParseCertsPEM(s.Data["ca.crt"]); err != nil || len(cas) != 1 {
		t.Errorf("%d CAs in the Secret (%v), want one", len(cas), err)
	}
	for _, bundle := range caBundles(t) {
		if err := verifies(bundle, cb); err != nil {
			t.Errorf("a configuration does not trust the served certificate: %v", err)
		}
	}
	if !a.LogSays("Another replica renewed the certificates first") && !b.LogSays("Another replica renewed the certificates first") {
		t.Log("no write conflict this time: one replica wrote before the other read")
	}
}

// The webhook exports the pods whose probed.io/ready gate no probed
// answers, and the gated pods on nodes where no probed pod is Ready, to
// callers the API server authorizes for /metrics.
func TestWebhookGateGauge(t *testing.T) {
	port := freePort(t)
	installWebhook(t, port)
	ns := labelledNamespace(t, "wh-gate", false)
	// probed's pods are looked for in this test's namespace.
	w := startWebhook(t, port, "--gate-grace=1s", "--metrics-secure=true", "--probed-namespace="+ns)
	w.waitReady()
	ctx := context.Background()
	node := "wh-gate-node"
	if _, err := cp.CreateNode(ctx, node); err != nil {
		t.Fatal(err)
	}
	p := probedPod("gated")
	p.Spec.NodeName = node
	p.Spec.ReadinessGates = []v1.PodReadinessGate{{ConditionType: probespec.ReadinessGate}}
	if _, err := client.CoreV1().Pods(ns).Create(ctx, p, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	// A scraper: a service account bound to deploy/'s metrics reader role.
	if _, err := client.RbacV1().ClusterRoleBindings().Create(ctx, &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "wh-gate-scraper"},
		RoleRef:    rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: "probed-webhook-metrics-reader"},
		Subjects:   []rbacv1.Subject{{Kind: "ServiceAccount", Namespace: ns, Name: "scraper"}},
	}, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	token, err := cp.TokenFor(ctx, ns, "scraper", "scraper", "", "")
	if err != nil {
		t.Fatal(err)
	}
	scrape := func(token string) (int, string) {
		c := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}}
		req, _ := http.NewRequest(http.MethodGet, "https://"+w.metrics+"/metrics", nil)
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := c.Do(req)
		if err != nil {
			return 0, err.Error()
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	// The metrics server is a runnable of its own: it may start listening a
	// moment after the webhook reports ready.
	var anon int
	var anonErr string
	eventually(t, "the metrics server to answer", 30*time.Second, func() bool {
		anon, anonErr = scrape("")
		return anon != 0
	})
	if anon != http.StatusUnauthorized {
		t.Errorf("an anonymous scrape: %d (%s), want 401", anon, anonErr)
	}
	want := fmt.Sprintf(`probed_webhook_pods_gate_unanswered{namespace=%q,node=%q} 1`, ns, node)
	eventually(t, "the unanswered gate in the gauge", 30*time.Second, func() bool {
		code, body := scrape(token)
		return code == http.StatusOK && strings.Contains(body, want)
	})
	// probed answers: the pod leaves the gauge.
	e := &testEnv{t: t, ctx: ctx, ns: ns}
	e.updateStatus("gated", func(p *v1.Pod) {
		p.Status.Conditions = append(p.Status.Conditions, v1.PodCondition{Type: probespec.ReadinessGate, Status: v1.ConditionFalse, Reason: "ContainersNotReady"})
	})
	eventually(t, "the answered gate to leave the gauge", 30*time.Second, func() bool {
		code, body := scrape(token)
		return code == http.StatusOK && !strings.Contains(body, `probed_webhook_pods_gate_unanswered{namespace="`+ns)
	})

	// Answered once, the pod still has no probed on its node: nothing
	// updates its readiness. It counts until a probed pod there is Ready.
	without := fmt.Sprintf(`probed_webhook_pods_gated_without_probed{namespace=%q,node=%q} 1`, ns, node)
	eventually(t, "the gated pod without probed in the gauge", 30*time.Second, func() bool {
		code, body := scrape(token)
		return code == http.StatusOK && strings.Contains(body, without)
	})
	pp, err := client.CoreV1().Pods(ns).Create(ctx, &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "probed-x", Labels: map[string]string{"app.kubernetes.io/name": "probed"}},
		Spec:       v1.PodSpec{NodeName: node, Containers: []v1.Container{{Name: "probed", Image: "probed"}}},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	pp.Status.Phase = v1.PodRunning
	pp.Status.Conditions = []v1.PodCondition{{Type: v1.PodReady, Status: v1.ConditionTrue}}
	if _, err := client.CoreV1().Pods(ns).UpdateStatus(ctx, pp, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "a Ready probed on the node to take the pod out of the gauge", 30*time.Second, func() bool {
		code, body := scrape(token)
		return code == http.StatusOK && !strings.Contains(body, `probed_webhook_pods_gated_without_probed{namespace="`+ns)
	})
}

func grep(body, prefix string) string {
	var out []string
	for _, l := range strings.Split(body, "\n") {
		if strings.HasPrefix(l, prefix) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}
