package prober

import (
	"context"
	"net/http"
	"reflect"
	"testing"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

func TestNewHTTPRequest(t *testing.T) {
	const ua = "kube-probe/1.34"
	target := Target{PodIP: "10.0.0.7", Ports: []v1.ContainerPort{{Name: "web", ContainerPort: 8080}}}
	defaults := http.Header{"User-Agent": {ua}, "Accept": {"*/*"}}

	cases := []struct {
		name        string
		action      v1.HTTPGetAction
		target      Target
		wantURL     string
		wantHost    string
		wantHeaders http.Header
		wantErr     string
	}{
		{
			name:        "defaults",
			action:      v1.HTTPGetAction{Path: "/healthz", Port: intstr.FromInt32(80)},
			wantURL:     "http://10.0.0.7:80/healthz",
			wantHeaders: defaults,
		},
		{
			name:        "scheme is lower-cased",
			action:      v1.HTTPGetAction{Scheme: "HTTPS", Port: intstr.FromInt32(443)},
			wantURL:     "https://10.0.0.7:443",
			wantHeaders: defaults,
		},
		{
			name:        "host overrides the pod IP",
			action:      v1.HTTPGetAction{Host: "example.test", Path: "/", Port: intstr.FromInt32(80)},
			wantURL:     "http://example.test:80/",
			wantHeaders: defaults,
		},
		{
			name:        "IPv6 pod IP is bracketed",
			action:      v1.HTTPGetAction{Path: "/", Port: intstr.FromInt32(80)},
			target:      Target{PodIP: "fd00::1"},
			wantURL:     "http://[fd00::1]:80/",
			wantHeaders: defaults,
		},
		{
			name:        "named port",
			action:      v1.HTTPGetAction{Path: "/ready", Port: intstr.FromString("web")},
			wantURL:     "http://10.0.0.7:8080/ready",
			wantHeaders: defaults,
		},
		{
			// 1.37's ResolveContainerPort: a string is a name, never a number.
			name:    "numeric string port",
			action:  v1.HTTPGetAction{Path: "/ready", Port: intstr.FromString("9000")},
			wantErr: `port "9000" not found`,
		},
		{
			name:        "query is kept",
			action:      v1.HTTPGetAction{Path: "/health?full=1&x=%20y", Port: intstr.FromInt32(80)},
			wantURL:     "http://10.0.0.7:80/health?full=1&x=%20y",
			wantHeaders: defaults,
		},
		{
			name:        "relative path gets a slash",
			action:      v1.HTTPGetAction{Path: "healthz", Port: intstr.FromInt32(80)},
			wantURL:     "http://10.0.0.7:80/healthz",
			wantHeaders: defaults,
		},
		{
			name:        "unparsable path is kept verbatim",
			action:      v1.HTTPGetAction{Path: "/a%zz", Port: intstr.FromInt32(80)},
			wantURL:     "http://10.0.0.7:80/a%25zz",
			wantHeaders: defaults,
		},
		{
			name: "headers are canonical and multi-valued",
			action: v1.HTTPGetAction{Port: intstr.FromInt32(80), HTTPHeaders: []v1.HTTPHeader{
				hdr("x-custom", "a"), hdr("X-Custom", "b"),
			}},
			wantURL:     "http://10.0.0.7:80",
			wantHeaders: http.Header{"User-Agent": {ua}, "Accept": {"*/*"}, "X-Custom": {"a", "b"}},
		},
		{
			name: "user agent and accept overridden",
			action: v1.HTTPGetAction{Port: intstr.FromInt32(80), HTTPHeaders: []v1.HTTPHeader{
				hdr("user-agent", "mine/1"), hdr("ACCEPT", "application/json"),
			}},
			wantURL:     "http://10.0.0.7:80",
			wantHeaders: http.Header{"User-Agent": {"mine/1"}, "Accept": {"application/json"}},
		},
		{
			name: "empty values suppress the defaults",
			action: v1.HTTPGetAction{Port: intstr.FromInt32(80), HTTPHeaders: []v1.HTTPHeader{
				hdr("User-Agent", ""), hdr("Accept", ""),
			}},
			wantURL:     "http://10.0.0.7:80",
			wantHeaders: http.Header{"User-Agent": {""}},
		},
		{
			name: "host header becomes req.Host",
			action: v1.HTTPGetAction{Port: intstr.FromInt32(80), HTTPHeaders: []v1.HTTPHeader{
				hdr("host", "vhost.example"),
			}},
			wantURL:     "http://10.0.0.7:80",
			wantHost:    "vhost.example",
			wantHeaders: http.Header{"User-Agent": {ua}, "Accept": {"*/*"}, "Host": {"vhost.example"}},
		},
		{
			name:    "unknown named port",
			action:  v1.HTTPGetAction{Port: intstr.FromString("nope")},
			wantErr: `port "nope" not found`,
		},
		{
			name:    "port out of range",
			action:  v1.HTTPGetAction{Port: intstr.FromInt32(65536)},
			wantErr: "invalid port number: 65536",
		},
		{
			name:    "bad host",
			action:  v1.HTTPGetAction{Host: "bad host\x7f", Port: intstr.FromInt32(80)},
			wantErr: `parse "http://bad%20host%7F:80": invalid URL escape "%20"`,
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			tgt := target
			if tc.target.PodIP != "" {
				tgt = tc.target
			}
			req, err := newHTTPRequest(context.Background(), &tc.action, tgt, ua)
			if tc.wantErr != "" {
				if err == nil || err.Error() != tc.wantErr {
					t.Fatalf("err = %v; want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if req.Method != http.MethodGet {
				t.Errorf("method = %s", req.Method)
			}
			if got := req.URL.String(); got != tc.wantURL {
				t.Errorf("URL = %q; want %q", got, tc.wantURL)
			}
			if req.Host != tc.wantHost {
				t.Errorf("Host = %q; want %q", req.Host, tc.wantHost)
			}
			if !reflect.DeepEqual(req.Header, tc.wantHeaders) {
				t.Errorf("headers = %v; want %v", req.Header, tc.wantHeaders)
			}
		})
	}
}

func TestUserAgentVersion(t *testing.T) {
	var unset *UserAgent
	if got := unset.Probe(); got != "kube-probe/1.37" {
		t.Errorf("default user agent = %q", got)
	}
	ua := NewUserAgent("1.33")
	if got := ua.Probe(); got != "kube-probe/1.33" {
		t.Errorf("user agent = %q", got)
	}
	if !ua.Set("1.35+") || ua.Set("1.35+") {
		t.Error("Set reports a change only when the version changes")
	}
	if got := ua.Lifecycle(); got != "kube-lifecycle/1.35+" {
		t.Errorf("lifecycle user agent = %q", got)
	}
}
