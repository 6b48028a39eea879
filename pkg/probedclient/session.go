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
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/httpstream"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/portforward"
	"k8s.io/client-go/transport/spdy"
)

// Session is one port-forward to one probed pod; requests go through it
// until Close.
type Session struct {
	Pod  *corev1.Pod
	base string
	http *http.Client
	stop chan struct{}
	done chan error
}

// maxBody bounds what a response may hold: a node's /debug/probes or
// /metrics is well under it.
const maxBody = 64 << 20

// Open forwards a loopback port to pod's endpoints port through the API
// server (pods/portforward, as `kubectl port-forward` does, over WebSockets
// or SPDY) and returns a session that sends the caller's credentials.
func Open(ctx context.Context, client kubernetes.Interface, cfg *rest.Config, pod *corev1.Pod, tlsOpts TLSOptions) (*Session, error) {
	rt, err := callerTransport(cfg, tlsOpts)
	if err != nil {
		return nil, err
	}
	u := client.CoreV1().RESTClient().Post().Resource("pods").Namespace(pod.Namespace).Name(pod.Name).SubResource("portforward").URL()
	spdyRT, upgrader, err := spdy.RoundTripperFor(cfg)
	if err != nil {
		return nil, err
	}
	var dialer httpstream.Dialer = spdy.NewDialer(upgrader, &http.Client{Transport: spdyRT}, http.MethodPost, u)
	if ws, err := portforward.NewSPDYOverWebsocketDialer(u, cfg); err == nil {
		dialer = portforward.NewFallbackDialer(ws, dialer, func(err error) bool {
			return httpstream.IsUpgradeFailure(err) || httpstream.IsHTTPSProxyError(err)
		})
	}
	port := EndpointsPort(pod)
	s := &Session{Pod: pod, stop: make(chan struct{}), done: make(chan error, 1)}
	ready := make(chan struct{})
	pf, err := portforward.NewOnAddresses(dialer, []string{"127.0.0.1"}, []string{"0:" + strconv.Itoa(port)}, s.stop, ready, io.Discard, io.Discard)
	if err != nil {
		return nil, err
	}
	go func() { s.done <- pf.ForwardPorts() }()
	select {
	case <-ready:
	case err := <-s.done:
		return nil, fmt.Errorf("port-forward to probed pod %s/%s port %d through the API server (needs get and create on pods/portforward in namespace %s): %w",
			pod.Namespace, pod.Name, port, pod.Namespace, err)
	case <-ctx.Done():
		s.Close()
		return nil, ctx.Err()
	}
	ports, err := pf.GetPorts()
	if err != nil || len(ports) != 1 {
		s.Close()
		return nil, fmt.Errorf("port-forward to %s/%s: no local port (%v)", pod.Namespace, pod.Name, err)
	}
	s.base = "https://" + net.JoinHostPort("127.0.0.1", strconv.Itoa(int(ports[0].Local)))
	s.http = &http.Client{Transport: rt, Timeout: 30 * time.Second}
	return s, nil
}

// Close ends the port-forward.
func (s *Session) Close() {
	select {
	case <-s.stop:
		return
	default:
	}
	close(s.stop)
	if s.http != nil {
		s.http.CloseIdleConnections()
	}
	<-s.done
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
		return nil, &AccessError{Path: path, Pod: s.Pod.Namespace + "/" + s.Pod.Name, Status: resp.StatusCode, Body: string(body)}
	}
	return nil, fmt.Errorf("GET %s from probed pod %s/%s: %s: %s", path, s.Pod.Namespace, s.Pod.Name, resp.Status, oneLine(body))
}

// Roles are deploy/scraper-roles.yaml's ClusterRoles, by the path they grant.
var Roles = map[string]string{
	"/debug/probes": "probed-debug-reader",
	"/metrics":      "probed-metrics-reader",
}

// AccessError is probed refusing the caller: 401 (the token is not valid)
// or 403 (its user may not get the path).
type AccessError struct {
	Path, Pod string
	Status    int
	Body      string
}

func (e *AccessError) Error() string {
	role := Roles[e.Path]
	if e.Status == http.StatusUnauthorized {
		return fmt.Sprintf("probed (%s) did not accept your token for %s (401 Unauthorized: the API server's TokenReview rejected it, or probed could not reach the API server): %s",
			e.Pod, e.Path, oneLine([]byte(e.Body)))
	}
	return fmt.Sprintf("probed (%s) refused %s (403 Forbidden): %s\nBind the ClusterRole %s (deploy/scraper-roles.yaml) to your user with a ClusterRoleBinding, e.g.\n  kubectl create clusterrolebinding <name> --clusterrole=%s --user=<you>   (or --serviceaccount=<namespace>:<name>)",
		e.Pod, e.Path, oneLine([]byte(e.Body)), role, role)
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
