package lifecycle

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"

	v1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"

	"github.com/probed-dev/probed/pkg/prober"
)

// maxRespBodyLength is how much of a response body is read (and thrown
// away) before the connection is closed, as in the kubelet.
const maxRespBodyLength = 10 << 10

// ReasonHTTPFallback is the kubelet's Warning event on the pod when an
// https hook was answered in plain HTTP and the retry over http worked.
const ReasonHTTPFallback = "LifecycleHTTPFallback"

// runHTTPGet sends the hook's GET as the kubelet's lifecycle handler does:
// the request the httpGet probe would build (user agent kube-lifecycle),
// to the pod's IP unless the hook names a host, through a client that skips
// TLS verification, uses no proxy and follows same-host redirects only. Any
// response is a success; only a transport error fails the hook. An https
// hook answered in plain HTTP is retried once over http, without its
// Authorization header, as the kubelet does.
func (r *Runner) runHTTPGet(ctx context.Context, pod *v1.Pod, container *v1.Container, action *v1.HTTPGetAction) error {
	target := prober.Target{PodIP: pod.Status.PodIP, Ports: container.Ports}
	for _, ip := range pod.Status.PodIPs {
		target.PodIPs = append(target.PodIPs, ip.IP)
	}
	if action.Host == "" && target.PodIP == "" {
		return errors.New("failed to find networking container: the pod has no IP")
	}
	req, err := prober.NewHTTPGetRequest(ctx, action, target, r.userAgent.Lifecycle())
	if err != nil {
		return err
	}
	// A transport per hook: hooks are rare (one per kill), and the kubelet's
	// keep-alive client would otherwise hold idle connections to pods.
	transport := &http.Transport{
		TLSClientConfig: &tls.Config{InsecureSkipVerify: true}, //nolint:gosec // kubelet parity: pods serve self-signed certificates
		DialContext:     prober.GuardedDialer(r.guard, target).DialContext,
		// What a probe reads of a head, not the kubelet's 10 MB.
		MaxResponseHeaderBytes: prober.MaxResponseHeaderBytes,
	}
	defer transport.CloseIdleConnections()
	client := &http.Client{Transport: transport, CheckRedirect: prober.RedirectPolicy(r.guard, target)}

	resp, err := client.Do(req)
	discardBody(resp)
	if isHTTPResponseError(err) {
		klog.V(1).InfoS("HTTPS request to lifecycle hook got HTTP response, retrying with HTTP", "pod", klog.KObj(pod), "host", req.URL.Host)
		retry := req.Clone(ctx)
		retry.URL.Scheme = "http"
		retry.Header.Del("Authorization")
		resp, httpErr := client.Do(retry)
		discardBody(resp)
		if httpErr == nil {
			if r.recorder != nil {
				r.recorder.Event(pod, "", v1.EventTypeWarning, ReasonHTTPFallback,
					fmt.Sprintf("request to HTTPS lifecycle hook %s got HTTP response, retry with HTTP succeeded", retry.URL.Host))
			}
			err = nil
		}
	}
	return err
}

// discardBody reads what the kubelet reads of a response, then closes it.
func discardBody(resp *http.Response) {
	if resp == nil {
		return
	}
	defer func() { _ = resp.Body.Close() }()
	if resp.ContentLength <= maxRespBodyLength {
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, maxRespBodyLength))
	}
}

// isHTTPResponseError: an https request that a plain HTTP server answered.
func isHTTPResponseError(err error) bool {
	var urlErr *url.Error
	if err == nil || !errors.As(err, &urlErr) {
		return false
	}
	return strings.Contains(urlErr.Err.Error(), "server gave HTTP response to HTTPS client")
}
