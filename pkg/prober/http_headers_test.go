package prober

import (
	"context"
	"fmt"
	"reflect"
	"sort"
	"testing"

	v1 "k8s.io/api/core/v1"

	"github.com/probed-dev/probed/pkg/probespec"
)

// TestHTTPHeadersOnTheWire checks the exact header set a probe sends, read
// off the socket: the kubelet's defaults are Accept, Connection and
// User-Agent (plus the Host line), and nothing else, no Accept-Encoding.
func TestHTTPHeadersOnTheWire(t *testing.T) {
	cases := []struct {
		name    string
		opts    Options
		headers []v1.HTTPHeader
		want    []string // header lines other than Host, sorted
		host    string   // expected Host line value; "" means 127.0.0.1:<port>
	}{
		{
			name: "default set",
			want: []string{"Accept: */*", "Connection: close", "User-Agent: kube-probe/1.37"},
		},
		{
			name: "configured version",
			opts: Options{UserAgent: NewUserAgent("1.33")},
			want: []string{"Accept: */*", "Connection: close", "User-Agent: kube-probe/1.33"},
		},
		{
			name:    "user agent overridden",
			headers: []v1.HTTPHeader{hdr("User-Agent", "my-agent/2")},
			want:    []string{"Accept: */*", "Connection: close", "User-Agent: my-agent/2"},
		},
		{
			name:    "user agent removed by an empty value",
			headers: []v1.HTTPHeader{hdr("User-Agent", "")},
			want:    []string{"Accept: */*", "Connection: close"},
		},
		{
			name:    "accept overridden",
			headers: []v1.HTTPHeader{hdr("accept", "application/json")},
			want:    []string{"Accept: application/json", "Connection: close", "User-Agent: kube-probe/1.37"},
		},
		{
			name:    "accept removed by an empty value",
			headers: []v1.HTTPHeader{hdr("Accept", "")},
			want:    []string{"Connection: close", "User-Agent: kube-probe/1.37"},
		},
		{
			name:    "multi-valued header",
			headers: []v1.HTTPHeader{hdr("x-token", "one"), hdr("X-Token", "two")},
			want: []string{"Accept: */*", "Connection: close", "User-Agent: kube-probe/1.37",
				"X-Token: one", "X-Token: two"},
		},
		{
			name:    "host header",
			headers: []v1.HTTPHeader{hdr("Host", "vhost.example")},
			want:    []string{"Accept: */*", "Connection: close", "User-Agent: kube-probe/1.37"},
			host:    "vhost.example",
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			srv := newWireServer(t)
			port := srv.port(t)
			p := New(nil, tc.opts)
			res, out, err := p.Probe(context.Background(), probespec.Readiness, httpSpec("/hz", port, tc.headers...), Target{PodIP: "127.0.0.1"}, nil)
			if err != nil || res.String() != "Success" || out != "ok" {
				t.Fatalf("Probe = %v, %q, %v", res, out, err)
			}
			reqs := srv.requests()
			if len(reqs) != 1 {
				t.Fatalf("got %d requests", len(reqs))
			}
			lines := reqs[0]
			if lines[0] != "GET /hz HTTP/1.1" {
				t.Errorf("request line = %q", lines[0])
			}
			wantHost := tc.host
			if wantHost == "" {
				wantHost = fmt.Sprintf("127.0.0.1:%d", port)
			}
			if lines[1] != "Host: "+wantHost {
				t.Errorf("first header = %q; want Host: %s", lines[1], wantHost)
			}
			got := append([]string(nil), lines[2:]...)
			sort.Strings(got)
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("headers = %q; want %q", got, tc.want)
			}
		})
	}
}
