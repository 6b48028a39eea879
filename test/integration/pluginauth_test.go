//go:build integration

package integration

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/utils/clock"

	"github.com/probed-dev/probed/pkg/probedclient"
	"github.com/probed-dev/probed/pkg/servingca"
)

// issue 30 item 5, on the real API server. probed publishes its serving
// certificate's CA in a ConfigMap of its pod (through deploy/'s Role and the
// confinement policy, which refuse it any other ConfigMap); the kubectl
// plugin's client, as the harness's admin (a client certificate: no token
// of its own), issues probed-plugin's token for probed's audience, verifies
// probed's TLS against the published CA, and reads /debug/probes. A token
// of the same account without that audience is refused by probed, on
// /debug/ and /readyz?verbose. (No kubelet here: the test opens the
// connection a port-forward would.)
func TestPluginClientCertificateAndAudience(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ip := loopbackIP()
	tg := startHTTPTarget(t, ip, true)
	e.runPod(e.createPod("web", mustJSON(probes{"app": {"readinessProbe": httpProbe(tg.Port, "/ready", nil)}}), true, container{name: "app"}), ip, time.Minute)
	// probed's token is bound to this pod (newEnv); the downward API
	// would give probed its name and UID.
	pod, err := client.CoreV1().Pods("probed-system").Get(e.ctx, "probed-"+e.node, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	p := e.startProbedEnv([]string{"POD_NAME=" + pod.Name, "POD_NAMESPACE=" + pod.Namespace, "POD_UID=" + string(pod.UID)})
	eventually(t, "probed's CA ConfigMap", 30*time.Second, func() bool {
		cm, err := client.CoreV1().ConfigMaps(pod.Namespace).Get(e.ctx, pod.Name, metav1.GetOptions{})
		return err == nil && cm.Data[servingca.CAKey] != ""
	})

	// probed's own token may write no other ConfigMap.
	cfg, err := clientcmd.BuildConfigFromFlags("", e.kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	probed := kubernetes.NewForConfigOrDie(cfg)
	for name, owner := range map[string]servingca.Pod{
		"another pod's":           {Namespace: pod.Namespace, Name: "probed-someone-else", UID: "0000"},
		"its name, another owner": {Namespace: pod.Namespace, Name: pod.Name, UID: "0000"},
	} {
		cm := servingca.ConfigMap(owner, []byte("x"))
		if owner.Name == pod.Name {
			_, err = probed.CoreV1().ConfigMaps(pod.Namespace).Update(e.ctx, cm, metav1.UpdateOptions{})
		} else {
			_, err = probed.CoreV1().ConfigMaps(pod.Namespace).Create(e.ctx, cm, metav1.CreateOptions{})
		}
		if !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), "may only write the ConfigMap of its own pod") {
			t.Errorf("probed writing %s ConfigMap: %v, want the confinement policy's refusal", name, err)
		}
	}

	// The admin: a client certificate and no token.
	admin := cp.RESTConfig()
	if admin.BearerToken != "" || admin.BearerTokenFile != "" || len(admin.CertData) == 0 && admin.CertFile == "" {
		t.Fatalf("the harness's admin is not a client-certificate user")
	}
	adminClient := kubernetes.NewForConfigOrDie(admin)
	tokens := probedclient.NewTokens(adminClient, probedclient.TokenOptions{Namespace: "probed-system",
		ServiceAccount: probedclient.DefaultServiceAccount, Audience: probedclient.DefaultAudience}, clock.RealClock{})
	direct := func(context.Context, *v1.Pod, int) (string, func(), error) { return p.addr, func() {}, nil }
	s, err := probedclient.Open(e.ctx, adminClient, admin, pod, probedclient.Options{Tokens: tokens, Forward: direct})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	eventually(t, "/debug/probes through the plugin's client", 30*time.Second, func() bool {
		body, err := s.Get(e.ctx, "/debug/probes", "namespace="+e.ns)
		return err == nil && strings.Contains(string(body), `"podName": "web"`)
	})

	// The same account's token for the API server's audience (what
	// `kubectl create token` gives without --audience) is refused.
	tr, err := client.CoreV1().ServiceAccounts("probed-system").CreateToken(e.ctx, probedclient.DefaultServiceAccount,
		&authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: new(int64(600))}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for path, want := range map[string]int{"/debug/probes": 401, "/readyz?verbose": 401, "/metrics": 200} {
		if code, body := p.getAs(path, tr.Status.Token); code != want {
			t.Errorf("%s with a token for the API server's audience: %d %.200q, want %d", path, code, body, want)
		}
	}
	withAudience, err := tokens.Token(e.ctx)
	if err != nil {
		t.Fatal(err)
	}
	if code, body := p.getAs("/debug/probes", withAudience); code != http.StatusOK {
		t.Errorf("/debug/probes with the same account's token for probed: %d %.200q", code, body)
	}
	// With --metrics-api-server-tokens=false, /metrics too.
	strict := newEnv(t).startProbed("--metrics-api-server-tokens=false")
	if code, _ := strict.getAs("/metrics", tr.Status.Token); code != http.StatusUnauthorized {
		t.Errorf("/metrics with an API server token and --metrics-api-server-tokens=false: %d, want 401", code)
	}
}

// issue 30 item 9c: the TokenReviews probed sends for made-up tokens are
// classified to deploy/'s FlowSchema, in a priority level of their own, not
// to the "service-accounts" schema every controller shares.
func TestEndpointReviewsFlowSchema(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	p := e.startProbed()
	n := 0
	eventually(t, "a review dispatched under probed-endpoint-reviews", 30*time.Second, func() bool {
		n++
		p.getAs("/debug/probes", fmt.Sprintf("made-up-%d", n))
		body, err := client.CoreV1().RESTClient().Get().AbsPath("/metrics").DoRaw(e.ctx)
		for _, l := range strings.Split(string(body), "\n") {
			if strings.HasPrefix(l, "apiserver_flowcontrol_dispatched_requests_total{") &&
				strings.Contains(l, `flow_schema="probed-endpoint-reviews"`) && strings.Contains(l, `priority_level="probed-endpoint-reviews"`) {
				return err == nil
			}
		}
		return false
	})
}
