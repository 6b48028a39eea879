package probedclient

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/httpstream"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/portforward"
	"k8s.io/client-go/transport/spdy"
)

// Session is one connection path to one probed pod; requests go through it
// until Close.
type Session struct {
	Pod *corev1.Pod
	// account is the service account whose token probed sees.
	account string
	base    string
	http    *http.Client
	stop    func()
}

// maxBody bounds what a response may hold: a node's /debug/probes or
// /metrics is well under it.
const maxBody = 64 << 20

// Forwarder opens a loopback address that reaches port of pod, and returns
// it and how to close it.
type Forwarder func(ctx context.Context, pod *corev1.Pod, port int) (addr string, stop func(), err error)

// Options say how a session reaches probed and what it shows it.
type Options struct {
	// Tokens issue the token shown to probed. Required.
	Tokens *Tokens
	// TLS is how probed's certificate is checked.
	TLS TLSOptions
	// Forward reaches the pod; nil: a port-forward through the API server
	// (PortForwarder).
	Forward Forwarder
}

// Open reaches pod's endpoints port with o.Forward and returns a session
// that checks probed's certificate as o.TLS says and shows probed a token
// from o.Tokens, never the caller's own credentials.
func Open(ctx context.Context, client kubernetes.Interface, cfg *rest.Config, pod *corev1.Pod, o Options) (*Session, error) {
	if o.Tokens == nil {
		return nil, errors.New("probedclient: no token source")
	}
	tc, err := tlsConfig(ctx, client, pod, o.TLS)
	if err != nil {
		return nil, err
	}
	forward := o.Forward
	if forward == nil {
		forward = PortForwarder(client, cfg)
	}
	addr, stop, err := forward(ctx, pod, EndpointsPort(pod))
	if err != nil {
		return nil, err
	}
	// Nothing of the API server's configuration applies: not its CA, its
	// proxy or the caller's credentials.
	rt := tokenTransport{tokens: o.Tokens, next: &http.Transport{TLSClientConfig: tc, ForceAttemptHTTP2: false}}
	if stop == nil {
		stop = func() {}
	}
	account := o.Tokens.o.Namespace + ":" + o.Tokens.o.ServiceAccount
	return &Session{Pod: pod, account: account, base: "https://" + addr, http: &http.Client{Transport: rt, Timeout: 30 * time.Second}, stop: sync.OnceFunc(stop)}, nil
}

// PortForwarder forwards a loopback port to the pod through the API server
// (pods/portforward, as `kubectl port-forward` does, over WebSockets or
// SPDY), as cfg's user.
func PortForwarder(client kubernetes.Interface, cfg *rest.Config) Forwarder {
	return func(ctx context.Context, pod *corev1.Pod, port int) (string, func(), error) {
		u := client.CoreV1().RESTClient().Post().Resource("pods").Namespace(pod.Namespace).Name(pod.Name).SubResource("portforward").URL()
		spdyRT, upgrader, err := spdy.RoundTripperFor(cfg)
		if err != nil {
			return "", nil, err
		}
		var dialer httpstream.Dialer = spdy.NewDialer(upgrader, &http.Client{Transport: spdyRT}, http.MethodPost, u)
		if ws, err := portforward.NewSPDYOverWebsocketDialer(u, cfg); err == nil {
			dialer = portforward.NewFallbackDialer(ws, dialer, func(err error) bool {
				return httpstream.IsUpgradeFailure(err) || httpstream.IsHTTPSProxyError(err)
			})
		}
		stopCh, done, ready := make(chan struct{}), make(chan error, 1), make(chan struct{})
		stop := sync.OnceFunc(func() { close(stopCh); <-done })
		pf, err := portforward.NewOnAddresses(dialer, []string{"127.0.0.1"}, []string{"0:" + strconv.Itoa(port)}, stopCh, ready, io.Discard, io.Discard)
		if err != nil {
			return "", nil, err
		}
		go func() { done <- pf.ForwardPorts() }()
		select {
		case <-ready:
		case err := <-done:
			return "", nil, fmt.Errorf("port-forward to probed pod %s/%s port %d through the API server (needs get and create on pods/portforward in namespace %s): %w",
				pod.Namespace, pod.Name, port, pod.Namespace, err)
		case <-ctx.Done():
			close(stopCh)
			<-done
			return "", nil, ctx.Err()
		}
		ports, err := pf.GetPorts()
		if err != nil || len(ports) != 1 {
			stop()
			return "", nil, fmt.Errorf("port-forward to %s/%s: no local port (%v)", pod.Namespace, pod.Name, err)
		}
		return net.JoinHostPort("127.0.0.1", strconv.Itoa(int(ports[0].Local))), stop, nil
	}
}

// Close ends the session and its forward.
func (s *Session) Close() {
	s.http.CloseIdleConnections()
	s.stop()
}

// Get fetches pathAndQuery from probed. A 401 or 403 is an *AccessError that
// names the role the caller lacks.
func (s *Session) Get(ctx context.Context, path, rawQuery string) ([]byte, error) {
	u := s.base + path
	if rawQuery != "" {
		u += "?" + rawQuery
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return nil, err
	}
	resp, err := s.http.Do(req)
	if err != nil {
		return nil, fmt.Errorf("GET %s from probed pod %s/%s: %w", path, s.Pod.Namespace, s.Pod.Name, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxBody+1))
	if err != nil {
		return nil, fmt.Errorf("GET %s from probed pod %s/%s: %w", path, s.Pod.Namespace, s.Pod.Name, err)
	}
	if len(body) > maxBody {
		return nil, fmt.Errorf("GET %s from probed pod %s/%s: response larger than %d bytes", path, s.Pod.Namespace, s.Pod.Name, maxBody)
	}
	switch resp.StatusCode {
	case http.StatusOK:
		return body, nil
	case http.StatusUnauthorized, http.StatusForbidden:
		return nil, &AccessError{Path: path, Pod: s.Pod.Namespace + "/" + s.Pod.Name, Status: resp.StatusCode, Body: string(body), Account: s.account}
	}
	return nil, fmt.Errorf("GET %s from probed pod %s/%s: %s: %s", path, s.Pod.Namespace, s.Pod.Name, resp.Status, oneLine(body))
}

// Roles are deploy/scraper-roles.yaml's ClusterRoles, by the path they grant.
var Roles = map[string]string{
	"/debug/probes": "probed-debug-reader",
	"/metrics":      "probed-metrics-reader",
}

// AccessError is probed refusing the token: 401 (not valid for probed) or
// 403 (its account may not get the path).
type AccessError struct {
	Path, Pod string
	Status    int
	Body      string
	// Account is the token's service account, namespace:name.
	Account string
}

func (e *AccessError) Error() string {
	role := Roles[e.Path]
	account := e.Account
	if account == "" {
		account = "<namespace>:<name>"
	}
	if e.Status == http.StatusUnauthorized {
		return fmt.Sprintf("probed (%s) did not accept the token of service account %s for %s (401 Unauthorized: the API server's TokenReview rejected it, "+
			"its audience is not one of probed's --endpoint-token-audiences, or probed could not reach the API server): %s",
			e.Pod, account, e.Path, oneLine([]byte(e.Body)))
	}
	return fmt.Sprintf("probed (%s) refused %s (403 Forbidden): %s\nBind the ClusterRole %s (deploy/scraper-roles.yaml) to the service account kubectl probed shows probed (--probed-service-account), e.g.\n  kubectl create clusterrolebinding <name> --clusterrole=%s --serviceaccount=%s",
		e.Pod, e.Path, oneLine([]byte(e.Body)), role, role, account)
}

// IsForbidden reports whether err is probed's 403.
func IsForbidden(err error) bool {
	var ae *AccessError
	return errors.As(err, &ae) && ae.Status == http.StatusForbidden
}

// oneLine is a response body for an error message: a Kubernetes Status's
// message, or the text cut to 512 bytes.
func oneLine(b []byte) string {
	const max = 512
	var st metav1.Status
	if json.Unmarshal(b, &st) == nil && st.Kind == "Status" && st.Message != "" {
		b = []byte(st.Message)
	}
	s := string(b)
	if len(s) > max {
		s = s[:max] + "…"
	}
	for len(s) > 0 && (s[len(s)-1] == '\n' || s[len(s)-1] == ' ') {
		s = s[:len(s)-1]
	}
	return s
}
