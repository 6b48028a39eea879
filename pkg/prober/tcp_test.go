package prober

import (
	"context"
	"fmt"
	"net"
	"testing"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

func TestTCPProbe(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = l.Close() }()
	_, open := hostPort(t, l.Addr().String())
	closed := closedPort(t)
	refused := fmt.Sprintf("dial tcp 127.0.0.1:%d: connect: connection refused", closed)

	target := Target{PodIP: "127.0.0.1", Ports: []v1.ContainerPort{
		{Name: "svc", ContainerPort: int32(open)},
		{Name: "down", ContainerPort: int32(closed)},
	}}
	cases := []struct {
		name       string
		action     v1.TCPSocketAction
		target     Target
		wantResult Result
		wantOutput string
		wantErr    string
	}{
		{name: "open port", action: v1.TCPSocketAction{Port: intstr.FromInt32(int32(open))}, wantResult: Success},
		{name: "closed port", action: v1.TCPSocketAction{Port: intstr.FromInt32(int32(closed))}, wantResult: Failure, wantOutput: refused},
		{name: "named port", action: v1.TCPSocketAction{Port: intstr.FromString("svc")}, wantResult: Success},
		{name: "named closed port", action: v1.TCPSocketAction{Port: intstr.FromString("down")}, wantResult: Failure, wantOutput: refused},
		// 1.37's ResolveContainerPort: a string is a name, never a number.
		{name: "numeric string port", action: v1.TCPSocketAction{Port: intstr.FromString(fmt.Sprint(open))},
			wantResult: Unknown, wantErr: fmt.Sprintf("port %q not found", fmt.Sprint(open))},
		{name: "host overrides pod IP", action: v1.TCPSocketAction{Host: "127.0.0.1", Port: intstr.FromInt32(int32(open))},
			target: Target{PodIP: "192.0.2.1"}, wantResult: Success},
		{name: "unknown name", action: v1.TCPSocketAction{Port: intstr.FromString("nope")},
			wantResult: Unknown, wantErr: `port "nope" not found`},
		{name: "out of range", action: v1.TCPSocketAction{Port: intstr.FromInt32(0)},
			wantResult: Unknown, wantErr: "invalid port number: 0"},
	}
	p := New(nil, Options{})
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			tgt := target
			if tc.target.PodIP != "" {
				tgt = tc.target
			}
			spec := &v1.Probe{TimeoutSeconds: 1, ProbeHandler: v1.ProbeHandler{TCPSocket: &tc.action}}
			res, out, err := p.runOnce(context.Background(), spec, tgt)
			if tc.wantErr != "" {
				if err == nil || err.Error() != tc.wantErr {
					t.Fatalf("err = %v; want %q", err, tc.wantErr)
				}
			} else if err != nil {
				t.Fatalf("unexpected error: %v", err)
			}
			if res != tc.wantResult || out != tc.wantOutput {
				t.Errorf("probe = %v, %q; want %v, %q", res, out, tc.wantResult, tc.wantOutput)
			}
		})
	}
}
