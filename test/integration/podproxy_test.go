//go:build integration

package integration

import (
	"context"
	"crypto/tls"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// TestPodProxyDropsCallerCredentials is why `kubectl probed` does not use the
// API server's pods/proxy (see pkg/probedclient): a request proxied to a pod
// arrives without the caller's Authorization header and without any client
// certificate, so probed, which authenticates each caller with a TokenReview,
// cannot tell who sent it. The pod is a TLS server in a network namespace
// this test creates (the API server refuses to proxy to loopback pod IPs).
func TestPodProxyDropsCallerCredentials(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("the pod's network namespace needs root")
	}
	e := newEnv(t)
	podIP := podNetns(t)

	type seen struct {
		header http.Header
		certs  int
	}
	var mu sync.Mutex
	var got []seen
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		got = append(got, seen{r.Header.Clone(), len(r.TLS.PeerCertificates)})
		mu.Unlock()
		fmt.Fprintln(w, "seen")
	}), TLSConfig: &tls.Config{ClientAuth: tls.RequestClientCert}}
	cert, err := tls.LoadX509KeyPair(servingCert.certFile, servingCert.keyFile)
	if err != nil {
		t.Fatal(err)
	}
	srv.TLSConfig.Certificates = []tls.Certificate{cert}
	ln := listenInNetns(t, podIP+":9809")
	go func() { _ = srv.ServeTLS(ln, "", "") }()
	t.Cleanup(func() { _ = srv.Close() })

	pod := e.createPod("proxied", "", false, container{name: "app"})
	e.runPod(pod, podIP, time.Minute)

	// The caller: a token whose user may proxy to the env's pods.
	if err := cp.EnsureServiceAccount(e.ctx, scraperNamespace, "probed-it-proxier"); err != nil {
		t.Fatal(err)
	}
	token, err := accountToken(e.ctx, "probed-it-proxier")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := client.RbacV1().Roles(e.ns).Create(e.ctx, &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: "proxier"},
		Rules: []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"pods/proxy"}, Verbs: []string{"get"}}}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := client.RbacV1().RoleBindings(e.ns).Create(e.ctx, &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "proxier"},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: "proxier"},
		Subjects: []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: scraperNamespace, Name: "probed-it-proxier"}}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	caller, err := kubernetes.NewForConfig(cp.ConfigForToken(token))
	if err != nil {
		t.Fatal(err)
	}
	var body []byte
	eventually(t, "a request proxied to the pod", 30*time.Second, func() bool {
		// Another header, as a control: it does get through.
		body, err = caller.CoreV1().RESTClient().Get().Namespace(e.ns).Resource("pods").Name("https:"+pod.Name+":9809").
			SubResource("proxy").Suffix("debug/probes").SetHeader("X-Probed-Control", "passed").DoRaw(context.Background())
		return err == nil
	})
	if strings.TrimSpace(string(body)) != "seen" {
		t.Fatalf("proxied answer %q", body)
	}
	mu.Lock()
	defer mu.Unlock()
	last := got[len(got)-1]
	if a := last.header.Get("Authorization"); a != "" {
		t.Errorf("the pod received the caller's Authorization header %q", a)
	}
	if c := last.header.Get("X-Probed-Control"); c != "passed" {
		t.Errorf("the control header did not get through (%q): the test cannot tell a dropped header from a lost request", c)
	}
	if last.certs != 0 {
		t.Errorf("the API server presented %d client certificates to the pod", last.certs)
	}
	if len(last.header.Values("X-Forwarded-For")) == 0 {
		t.Errorf("no X-Forwarded-For: did the request come through the API server? headers %v", last.header)
	}
	t.Logf("headers the pod received through pods/proxy: %v", last.header)
}

// podNetns creates a network namespace with a veth pair to the host and
// returns the namespace end's address, routable from the API server.
func podNetns(t *testing.T) string {
	t.Helper()
	id := os.Getpid() % 100000
	ns, host, peer := fmt.Sprintf("probed-it-px-%d", id), fmt.Sprintf("pxh%d", id), fmt.Sprintf("pxp%d", id)
	const hostIP, podIP = "10.254.253.1", "10.254.253.2"
	run := func(args ...string) {
		t.Helper()
		if out, err := exec.Command(args[0], args[1:]...).CombinedOutput(); err != nil {
			t.Fatalf("%s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
	run("ip", "netns", "add", ns)
	t.Cleanup(func() { _ = exec.Command("ip", "netns", "del", ns).Run() })
	run("ip", "link", "add", host, "type", "veth", "peer", "name", peer)
	t.Cleanup(func() { _ = exec.Command("ip", "link", "del", host).Run() })
	run("ip", "link", "set", peer, "netns", ns)
	run("ip", "addr", "add", hostIP+"/30", "dev", host)
	run("ip", "link", "set", host, "up")
	run("ip", "-n", ns, "addr", "add", podIP+"/30", "dev", peer)
	run("ip", "-n", ns, "link", "set", peer, "up")
	run("ip", "-n", ns, "link", "set", "lo", "up")
	return podIP
}

// listenInNetns opens a listener inside the test's namespace from a thread
// moved there; the thread is never unlocked, so it dies with its goroutine.
func listenInNetns(t *testing.T, addr string) net.Listener {
	t.Helper()
	f, err := os.Open(fmt.Sprintf("/run/netns/probed-it-px-%d", os.Getpid()%100000))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	type res struct {
		ln  net.Listener
		err error
	}
	c := make(chan res, 1)
	go func() {
		runtime.LockOSThread()
		if err := unix.Setns(int(f.Fd()), unix.CLONE_NEWNET); err != nil {
			c <- res{nil, err}
			return
		}
		ln, err := net.Listen("tcp", addr)
		c <- res{ln, err}
	}()
	r := <-c
	if r.err != nil {
		t.Fatal(r.err)
	}
	t.Cleanup(func() { _ = r.ln.Close() })
	return r.ln
}
