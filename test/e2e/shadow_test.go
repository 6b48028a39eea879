//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/rest"
	sigsyaml "sigs.k8s.io/yaml"

	"github.com/probed-dev/probed/test/harness/proc"
	promh "github.com/probed-dev/probed/test/harness/prometheus"
	"github.com/probed-dev/probed/test/monitoring"
)

// docs/migration.md on the real node, step by step:
//
//  1. A pod with ordinary spec probes (HTTP readiness, TCP liveness, exec
//     startup) is probed by the kubelet. A second container's readiness probe
//     targets the node's own 127.0.0.1, which the kubelet reaches and
//     probed's default --probe-host-policy refuses: a real disagreement.
//  2. A second probed runs beside the kubelet as the guide's shadow
//     DaemonSet does: --probe-source=spec --dry-run.
//  3. A real Prometheus scrapes it, the DaemonSet's probed, and the
//     kubelet's own /metrics/probes (read straight from the kubelet,
//     labelled job="kubelet", metrics_path="/metrics/probes" as kube-
//     prometheus does). The dashboard's shadow panels show the same success
//     ratio from both for every probe of the app container, and the
//     node-local probe as a disagreement.
//  4. The shadow probed wrote nothing: no probed condition, no probed field
//     manager, no event from probed.
//  5. The pod, converted by `probed convert` and applied with kubectl, is
//     gated Ready by the DaemonSet's probed; the kubelet counts only the
//     node-local probe, which convert leaves with it (probed would refuse
//     it); the panels list the app container's probes as run by probed only.
func TestShadowModeBesideKubelet(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	const ns = "shadow"
	if err := createNamespace(ctx, ns); err != nil {
		t.Fatal(err)
	}
	probedBin := proc.BuildTB(t, "./cmd/probed", proc.BuildOptions{})

	// 1. The kubelet probes an ordinary pod.
	probedPort := strings.TrimPrefix(nd.ProbedMetricsURL(), "https://127.0.0.1:")
	pod := &v1.Pod{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"},
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: ns},
		Spec: v1.PodSpec{
			AutomountServiceAccountToken: ptr(false),
			EnableServiceLinks:           ptr(false),
			Containers: []v1.Container{{
				Name: "app", Image: imgTarget, ImagePullPolicy: v1.PullNever,
				Args:           []string{"--http=:8080", "--tcp=:9000"},
				Ports:          []v1.ContainerPort{{Name: "http", ContainerPort: 8080}},
				ReadinessProbe: &v1.Probe{ProbeHandler: httpGetHandler("/readyz", 8080), PeriodSeconds: 2},
				LivenessProbe:  &v1.Probe{ProbeHandler: tcpSocketHandler(9000), PeriodSeconds: 2},
				StartupProbe:   &v1.Probe{ProbeHandler: execHandler("test", "-e", "/bin/probe-target"), PeriodSeconds: 2},
			}, {
				Name: "nodelocal", Image: imgTarget, ImagePullPolicy: v1.PullNever, Args: []string{"--http="},
				ReadinessProbe: &v1.Probe{PeriodSeconds: 2, ProbeHandler: v1.ProbeHandler{HTTPGet: &v1.HTTPGetAction{
					Host: "127.0.0.1", Path: "/healthz", Port: intstr.Parse(probedPort), Scheme: v1.URISchemeHTTPS}}},
			}},
		},
	}
	manifest, err := sigsyaml.Marshal(pod)
	if err != nil {
		t.Fatal(err)
	}
	created, err := client.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = client.CoreV1().Pods(ns).Delete(context.Background(), "web", metav1.DeleteOptions{GracePeriodSeconds: ptr(int64(0))})
	})
	waitPod(ctx, t, ns, "the kubelet's probes to make it Ready", func(p *v1.Pod) bool {
		return p.UID == created.UID && containerReady(p, "app") && containerReady(p, "nodelocal")
	})

	// 2. probed in shadow mode beside it.
	shadowAddr := freeLoopbackAddr(t)
	// Killed at the end: its shutdown is not what this test is about.
	proc.StartDaemon(t, "shadow-probed", probedBin, []string{"--kubeconfig=" + nd.KubeconfigPath, "--node-name=" + nd.Name,
		"--probe-source=spec", "--dry-run", "--metrics-bind-address=" + shadowAddr,
		"--runtime-endpoint=" + nd.Containerd().Endpoint(), "-v=2"}, proc.DaemonOptions{KillAtEnd: true, TailLines: 60})

	// 3. Prometheus: both probeds and the kubelet's /metrics/probes, over
	// TLS with a scraper's token, as deploy/monitoring's PodMonitor scrapes
	// probed (one scrape config for all three: the stand-in for the
	// kubelet serves TLS too).
	tokenFile := filepath.Join(t.TempDir(), "token")
	if err := nd.WriteProbedToken(ctx, tokenFile, 30*time.Minute); err != nil {
		t.Fatal(err)
	}
	// The stand-in reads the kubelet's /metrics/probes straight from it,
	// with the admin's client certificate: the API server's node proxy
	// refuses a node whose address is loopback.
	kubeletURL, kubeletClient := kubeletProbesEndpoint(ctx, t)
	kubelet := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		resp, err := kubeletClient.Get(kubeletURL)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadGateway)
			return
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		if err != nil || resp.StatusCode != http.StatusOK {
			http.Error(w, fmt.Sprintf("%s: %d %v", kubeletURL, resp.StatusCode, err), http.StatusBadGateway)
			return
		}
		w.Header().Set("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
		_, _ = w.Write(b)
	}))
	defer kubelet.Close()
	node := map[string]string{"node": nd.Name}
	prom, err := promh.Start(ctx, promh.Options{Targets: []promh.Target{
		{Addr: shadowAddr, Labels: node},
		{Addr: strings.TrimPrefix(nd.ProbedMetricsURL(), "https://"), Labels: node},
		{Addr: strings.TrimPrefix(kubelet.URL, "https://"), Labels: map[string]string{"node": nd.Name, "job": "kubelet", "metrics_path": "/metrics/probes"}},
	}, Scrape: promh.Scrape{HTTPS: true, BearerTokenFile: tokenFile, InsecureSkipVerify: true}})
	if err != nil {
		t.Fatalf("starting Prometheus: %v", err)
	}
	defer prom.Stop()
	upCtx, upCancel := context.WithTimeout(ctx, time.Minute)
	defer upCancel()
	if err := prom.WaitUp(upCtx, 3); err != nil {
		v, _ := prom.Query(ctx, "up")
		t.Fatalf("Prometheus does not reach all three targets: %v (up: %v)\n%s", err, v, prom.LogTail(20))
	}
	panels := shadowQueries(t, ns)
	query := func(q string) promh.Vector {
		v, err := prom.Query(ctx, q)
		if err != nil {
			t.Fatalf("%s: %v", q, err)
		}
		return v
	}
	key := func(s promh.Sample) string { return s.Metric["container"] + "/" + s.Metric["probe_type"] }
	eventuallyProm := func(what string, ok func() bool) {
		t.Helper()
		if err := wait.PollUntilContextTimeout(ctx, time.Second, 2*time.Minute, true, func(context.Context) (bool, error) { return ok(), nil }); err != nil {
			t.Fatalf("timed out waiting for %s", what)
		}
	}
	// Both sides count every periodic probe of the app container: a success
	// ratio of 1. (A startup probe runs until it first succeeds, so its rate
	// is soon 0 and its ratio undefined; its series are compared below.)
	for _, side := range []string{"A", "B"} {
		q := panels["Shadow: success ratio, probed vs kubelet/"+side]
		eventuallyProm("success ratios of "+side, func() bool {
			got := map[string]float64{}
			for _, s := range query(q) {
				got[key(s)] = s.Value
			}
			return got["app/Readiness"] == 1 && got["app/Liveness"] == 1
		})
	}
	// The same successful series from both scrapes, but for job and instance.
	series := func(sel string) map[string]bool {
		out := map[string]bool{}
		for _, s := range query(`prober_probe_total{namespace="` + ns + `", container="app", ` + sel + `}`) {
			delete(s.Metric, "job")
			delete(s.Metric, "instance")
			delete(s.Metric, "metrics_path")
			s.Value = 0 // the label set only: the two count at different moments
			out[s.String()] = true
		}
		return out
	}
	var fromProbed, fromKubelet map[string]bool
	defer func() {
		if t.Failed() {
			t.Logf("series from probed: %v\nfrom the kubelet: %v", fromProbed, fromKubelet)
		}
	}()
	eventuallyProm("the same series from probed and the kubelet", func() bool {
		fromProbed, fromKubelet = series(`job="probed", result="successful"`), series(`job="kubelet", result="successful"`)
		return len(fromProbed) >= 3 && fmt.Sprint(fromProbed) == fmt.Sprint(fromKubelet)
	})
	// The node-local probe is a disagreement: the kubelet reaches
	// 127.0.0.1; probed refuses it as InvalidProbe and does not run it, so it
	// shows as run by the kubelet only (C).
	eventuallyProm("the node-local probe shown as a disagreement", func() bool {
		for _, q := range []string{panels["Shadow: disagreements/A"], panels["Shadow: disagreements/C"]} {
			for _, s := range query(q) {
				if key(s) == "nodelocal/Readiness" {
					return true
				}
			}
		}
		return false
	})
	for _, s := range query(panels["Shadow: disagreements/A"]) {
		if s.Metric["container"] == "app" {
			t.Errorf("the app container's probes disagree: %s", s)
		}
	}

	// 4. The shadow probed wrote nothing.
	p, err := client.CoreV1().Pods(ns).Get(ctx, "web", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range p.Status.Conditions {
		if strings.Contains(string(c.Type), "probed.io") {
			t.Errorf("shadow mode wrote condition %s", c.Type)
		}
	}
	for _, mf := range p.ManagedFields {
		if mf.Manager == "probed" {
			t.Errorf("shadow mode wrote the pod: managed fields of %q", mf.Manager)
		}
	}
	evs, err := client.CoreV1().Events(ns).List(ctx, metav1.ListOptions{FieldSelector: "involvedObject.uid=" + string(p.UID)})
	if err != nil {
		t.Fatal(err)
	}
	for _, ev := range evs.Items {
		if ev.Source.Component == "probed" || ev.ReportingController == "probed" {
			t.Errorf("shadow mode emitted event %s: %s", ev.Reason, ev.Message)
		}
	}

	// 5. Switch: the converted manifest, applied.
	conv := exec.CommandContext(ctx, probedBin, "convert")
	conv.Stdin = strings.NewReader(string(manifest))
	converted, err := conv.Output()
	if err != nil {
		t.Fatalf("probed convert: %v", err)
	}
	if out, err := kubectl(ctx, "delete", "pod", "-n", ns, "web", "--grace-period=0", "--wait=true"); err != nil {
		t.Fatalf("kubectl delete: %v\n%s", err, out)
	}
	apply := exec.CommandContext(ctx, "kubectl", "--kubeconfig", nd.KubeconfigPath, "apply", "-f", "-")
	apply.Stdin = strings.NewReader(string(converted))
	if out, err := apply.CombinedOutput(); err != nil {
		t.Fatalf("kubectl apply of the converted manifest: %v\n%s\n%s", err, out, converted)
	}
	adopted := waitPod(ctx, t, ns, "probed's gate to make the converted pod's app container ready", func(p *v1.Pod) bool {
		return p.UID != created.UID && condStatus(p, "ready.probed.io/app") == v1.ConditionTrue && containerReady(p, "app")
	})
	eventuallyProm("the converted pod's probes run by probed only", func() bool {
		n := 0
		for _, s := range query(panels["Shadow: disagreements/B"]) {
			if s.Metric["pod"] == "web" && s.Metric["container"] == "app" {
				n++
			}
		}
		return n == 3
	})
	// convert leaves the node-local probe, which probed would refuse, with
	// the kubelet (and says so): the kubelet runs it and nothing else.
	eventuallyProm("the kubelet probes only what convert left with it", func() bool {
		v := query(`prober_probe_total{job="kubelet", pod_uid="` + string(adopted.UID) + `"}`)
		for _, s := range v {
			if s.Metric["container"] != "nodelocal" || s.Metric["probe_type"] != "Readiness" {
				t.Errorf("the kubelet probes the converted pod's %s/%s", s.Metric["container"], s.Metric["probe_type"])
				return true
			}
		}
		return len(v) > 0
	})
}

// shadowQueries are the shadow panels' queries of the dashboard, by
// "<panel>/<refId>", with the test's namespace and kubelet job.
func shadowQueries(t *testing.T, ns string) map[string]string {
	t.Helper()
	d, _, err := monitoring.LoadDashboard()
	if err != nil {
		t.Fatal(err)
	}
	vars := map[string]string{"node": ".*", "namespace": ns, "pod": ".*", "kubelet_job": "kubelet", "datasource": "prometheus"}
	out := map[string]string{}
	for _, q := range d.Queries() {
		if !strings.HasPrefix(q.Panel, "Shadow") {
			continue
		}
		expr, err := monitoring.Substitute(q.Expr, map[string]string{"__rate_interval": "30s"}, vars)
		if err != nil {
			t.Fatal(err)
		}
		out[q.Panel+"/"+q.RefID] = expr
	}
	if len(out) < 5 {
		t.Fatalf("%d shadow queries in the dashboard", len(out))
	}
	return out
}

// kubeletProbesEndpoint is the URL of the node's kubelet's /metrics/probes
// and a client the kubelet accepts (the admin's client certificate; the
// kubelet's serving certificate is self-signed).
func kubeletProbesEndpoint(ctx context.Context, t *testing.T) (string, *http.Client) {
	t.Helper()
	node, err := client.CoreV1().Nodes().Get(ctx, nd.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	tlsCfg, err := rest.TLSConfigFor(nd.RESTConfig())
	if err != nil {
		t.Fatal(err)
	}
	tlsCfg.InsecureSkipVerify = true
	tr := &http.Transport{TLSClientConfig: tlsCfg}
	t.Cleanup(tr.CloseIdleConnections)
	return fmt.Sprintf("https://127.0.0.1:%d/metrics/probes", node.Status.DaemonEndpoints.KubeletEndpoint.Port),
		&http.Client{Timeout: 10 * time.Second, Transport: tr}
}

// waitPod polls the pod "web" of ns until ok holds.
func waitPod(ctx context.Context, t *testing.T, ns, what string, ok func(*v1.Pod) bool) *v1.Pod {
	t.Helper()
	return pollPod(t, ctx, ns, "web", what, podStartTimeout, ok)
}

func containerReady(p *v1.Pod, name string) bool {
	for _, cs := range p.Status.ContainerStatuses {
		if cs.Name == name {
			return cs.Ready
		}
	}
	return false
}

func freeLoopbackAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}
