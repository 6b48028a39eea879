package probedclient

import (
	"context"
	"crypto/tls"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/rest"
	k8stesting "k8s.io/client-go/testing"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/probed-dev/probed/pkg/endpoints"
	"github.com/probed-dev/probed/pkg/servingca"
)

// probedServer is a TLS server with a certificate like probed's own
// (self-signed for the node's name), recording every request as it came.
type probedServer struct {
	addr  string
	ca    []byte
	mu    sync.Mutex
	dumps []string
}

func startProbed(t *testing.T, node string) *probedServer {
	t.Helper()
	ss, err := endpoints.NewSelfSigned([]string{node, "localhost", "127.0.0.1"})
	if err != nil {
		t.Fatal(err)
	}
	pair, err := tls.X509KeyPair(ss.CertPEM, ss.KeyPEM)
	if err != nil {
		t.Fatal(err)
	}
	p := &probedServer{ca: ss.CAPEM}
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		dump, _ := httputil.DumpRequest(r, true)
		p.mu.Lock()
		p.dumps = append(p.dumps, string(dump))
		p.mu.Unlock()
		_, _ = w.Write([]byte("[]"))
	}))
	srv.TLS = &tls.Config{Certificates: []tls.Certificate{pair}}
	srv.StartTLS()
	t.Cleanup(srv.Close)
	p.addr = srv.Listener.Addr().String()
	return p
}

func (p *probedServer) seen() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return strings.Join(p.dumps, "\n")
}

// forwardTo is a Forwarder that reaches addr directly (a port-forward's
// local end, without the kubelet).
func forwardTo(addr string) Forwarder {
	return func(context.Context, *corev1.Pod, int) (string, func(), error) { return addr, func() {}, nil }
}

// plugin is a cluster as the plugin sees it: probed's pod on node-a, the CA
// it published (caPEM; nil: none), and an API server that issues tokens
// for probed-plugin and records the requests.
func plugin(t *testing.T, caPEM []byte) (*fake.Clientset, *corev1.Pod, *[]authenticationv1.TokenRequest) {
	t.Helper()
	pod := probedPod("probed-x", "node-a", corev1.PodRunning, true, time.Now())
	pod.UID = "uid-x"
	objs := []runtime.Object{pod}
	if caPEM != nil {
		objs = append(objs, servingca.ConfigMap(servingca.Pod{Namespace: pod.Namespace, Name: pod.Name, UID: pod.UID}, caPEM))
	}
	c := fake.NewClientset(objs...)
	var issued []authenticationv1.TokenRequest
	c.PrependReactor("create", "serviceaccounts", func(a k8stesting.Action) (bool, runtime.Object, error) {
		ca, ok := a.(k8stesting.CreateAction)
		if !ok || a.GetSubresource() != "token" {
			return false, nil, nil
		}
		tr := ca.GetObject().(*authenticationv1.TokenRequest).DeepCopy()
		issued = append(issued, *tr)
		tr.Status = authenticationv1.TokenRequestStatus{Token: "issued-for-probed", ExpirationTimestamp: metav1.NewTime(time.Now().Add(10 * time.Minute))}
		return true, tr, nil
	})
	return c, pod, &issued
}

// The operator's own bearer token (here a cluster-admin's from the
// kubeconfig) never reaches a node: probed sees a token issued for its
// audience, of the plugin's service account, and nothing else of the
// kubeconfig (issue 30: the kubeconfig's token went to every node).
func TestOperatorTokenNeverSentToProbed(t *testing.T) {
	srv := startProbed(t, "node-a")
	client, pod, issued := plugin(t, srv.ca)
	cfg := &rest.Config{Host: "https://apiserver.invalid", BearerToken: "operator-admin-token",
		TLSClientConfig: rest.TLSClientConfig{CAData: []byte("not for probed")}}
	tokens := NewTokens(client, TokenOptions{Namespace: DefaultNamespace, ServiceAccount: DefaultServiceAccount, Audience: DefaultAudience}, clocktesting.NewFakePassiveClock(time.Now()))
	s, err := Open(context.Background(), client, cfg, pod, Options{Tokens: tokens, Forward: forwardTo(srv.addr)})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	for range 2 {
		if _, err := s.Get(context.Background(), "/debug/probes", ""); err != nil {
			t.Fatal(err)
		}
	}
	seen := srv.seen()
	if strings.Contains(seen, "operator-admin-token") {
		t.Errorf("the operator's token reached probed:\n%s", seen)
	}
	if strings.Count(seen, "Authorization: Bearer issued-for-probed") != 2 {
		t.Errorf("probed did not get the issued token on each request:\n%s", seen)
	}
	if len(*issued) != 1 {
		t.Fatalf("%d TokenRequests for two requests, want 1 (reused)", len(*issued))
	}
	if tr := (*issued)[0]; len(tr.Spec.Audiences) != 1 || tr.Spec.Audiences[0] != DefaultAudience || *tr.Spec.ExpirationSeconds != 600 {
		t.Errorf("TokenRequest %+v, want audience %q for 600 s", tr.Spec, DefaultAudience)
	}
}

// A client-certificate user (kubeadm's and kind's admin) has no token of
// its own; the plugin works for it all the same.
func TestClientCertificateUserWorks(t *testing.T) {
	srv := startProbed(t, "node-a")
	client, pod, _ := plugin(t, srv.ca)
	cfg := &rest.Config{Host: "https://apiserver.invalid", TLSClientConfig: rest.TLSClientConfig{CertData: []byte("x"), KeyData: []byte("y")}}
	s, err := Open(context.Background(), client, cfg, pod, Options{Tokens: NewTokens(client, TokenOptions{Namespace: DefaultNamespace, ServiceAccount: DefaultServiceAccount, Audience: DefaultAudience}, clocktesting.NewFakePassiveClock(time.Now())), Forward: forwardTo(srv.addr)})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if _, err := s.Get(context.Background(), "/debug/probes", ""); err != nil {
		t.Fatal(err)
	}
}

// TLS is verified by default: a server whose certificate the published CA
// did not sign (whatever took probed's port) is refused before any token is
// sent, and so is a pod that published no CA; skipping verification takes
// an explicit option.
func TestUnverifiedProbedRefused(t *testing.T) {
	impostor := startProbed(t, "node-a") // same name, another CA
	genuine := startProbed(t, "node-a")
	ctx := context.Background()
	for _, tc := range []struct {
		name    string
		ca      []byte
		tls     TLSOptions
		wantErr string
	}{
		{"another CA published", genuine.ca, TLSOptions{}, "certificate signed by unknown authority"},
		{"no CA published", nil, TLSOptions{}, "reading the serving CA"},
		{"a CA file that did not sign it", nil, TLSOptions{CAFile: "testdata/other-ca.crt"}, "certificate"},
		{"verification skipped", nil, TLSOptions{InsecureSkipVerify: true}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			client, pod, _ := plugin(t, tc.ca)
			tokens := NewTokens(client, TokenOptions{Namespace: DefaultNamespace, ServiceAccount: DefaultServiceAccount, Audience: DefaultAudience}, clocktesting.NewFakePassiveClock(time.Now()))
			s, err := Open(ctx, client, &rest.Config{BearerToken: "operator-admin-token"}, pod, Options{Tokens: tokens, TLS: tc.tls, Forward: forwardTo(impostor.addr)})
			if err == nil {
				defer s.Close()
				_, err = s.Get(ctx, "/debug/probes", "")
			}
			if tc.wantErr == "" {
				if err != nil {
					t.Fatalf("with verification skipped: %v", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Fatalf("err = %v, want one with %q", err, tc.wantErr)
			}
			if seen := impostor.seen(); seen != "" {
				t.Errorf("the impostor got a request:\n%s", seen)
			}
		})
	}
}

// A CA published by an earlier pod of the same name is not trusted.
func TestPublishedCAMustBeThePods(t *testing.T) {
	srv := startProbed(t, "node-a")
	client, pod, _ := plugin(t, nil)
	stale := servingca.ConfigMap(servingca.Pod{Namespace: pod.Namespace, Name: pod.Name, UID: "an-earlier-pod"}, srv.ca)
	if _, err := client.CoreV1().ConfigMaps(pod.Namespace).Create(context.Background(), stale, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	tokens := NewTokens(client, TokenOptions{Namespace: DefaultNamespace, ServiceAccount: DefaultServiceAccount, Audience: DefaultAudience}, clocktesting.NewFakePassiveClock(time.Now()))
	if _, err := Open(context.Background(), client, &rest.Config{}, pod, Options{Tokens: tokens, Forward: forwardTo(srv.addr)}); err == nil || !strings.Contains(err.Error(), "is not the serving CA") {
		t.Fatalf("err = %v, want the stale CA refused", err)
	}
}

// With --probed-ca-file (a certificate of the operator's own), the name
// checked is 127.0.0.1 unless --probed-server-name says otherwise.
func TestCAFile(t *testing.T) {
	srv := startProbed(t, "node-a")
	ca := filepath.Join(t.TempDir(), "ca.crt")
	if err := os.WriteFile(ca, srv.ca, 0o600); err != nil {
		t.Fatal(err)
	}
	client, pod, _ := plugin(t, nil)
	tokens := NewTokens(client, TokenOptions{Namespace: DefaultNamespace, ServiceAccount: DefaultServiceAccount, Audience: DefaultAudience}, clocktesting.NewFakePassiveClock(time.Now()))
	for _, tc := range []struct {
		serverName string
		ok         bool
	}{{"", true}, {"node-a", true}, {"node-b", false}} {
		s, err := Open(context.Background(), client, &rest.Config{}, pod, Options{Tokens: tokens, TLS: TLSOptions{CAFile: ca, ServerName: tc.serverName}, Forward: forwardTo(srv.addr)})
		if err != nil {
			t.Fatal(err)
		}
		_, err = s.Get(context.Background(), "/debug/probes", "")
		s.Close()
		if (err == nil) != tc.ok {
			t.Errorf("server name %q: err = %v, want ok=%v", tc.serverName, err, tc.ok)
		}
	}
}

// A token is reused until a minute before it expires, then issued anew.
func TestTokensRenew(t *testing.T) {
	client, _, issued := plugin(t, nil)
	clk := clocktesting.NewFakePassiveClock(time.Now())
	tokens := NewTokens(client, TokenOptions{Namespace: DefaultNamespace, ServiceAccount: DefaultServiceAccount, Audience: DefaultAudience}, clk)
	for range 3 {
		if _, err := tokens.Token(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	clk.SetTime(clk.Now().Add(9*time.Minute + time.Second))
	if _, err := tokens.Token(context.Background()); err != nil {
		t.Fatal(err)
	}
	if len(*issued) != 2 {
		t.Errorf("%d tokens issued, want 2", len(*issued))
	}
}

func TestAccessErrorNamesRole(t *testing.T) {
	body := `{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"forbidden: User \"system:serviceaccount:probed-system:probed-plugin\" cannot get path \"/debug/probes\"","reason":"Forbidden","code":403}`
	err := error(&AccessError{Path: "/debug/probes", Pod: "probed-system/probed-x", Status: 403, Body: body, Account: "probed-system:probed-plugin"})
	msg := err.Error()
	for _, want := range []string{"403 Forbidden", `User "system:serviceaccount:probed-system:probed-plugin" cannot get path "/debug/probes"`,
		"ClusterRole probed-debug-reader", "--clusterrole=probed-debug-reader --serviceaccount=probed-system:probed-plugin"} {
		if !strings.Contains(msg, want) {
			t.Errorf("error lacks %q:\n%s", want, msg)
		}
	}
	if !IsForbidden(err) {
		t.Error("IsForbidden = false")
	}
	if m := (&AccessError{Path: "/metrics", Status: 403}).Error(); !strings.Contains(m, "probed-metrics-reader") {
		t.Errorf("/metrics: %s", m)
	}
}
