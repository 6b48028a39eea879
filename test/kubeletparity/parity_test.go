package kubeletparity

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/component-base/version"
	"k8s.io/kubernetes/pkg/probe"
	grpcprobe "k8s.io/kubernetes/pkg/probe/grpc"
	httpprobe "k8s.io/kubernetes/pkg/probe/http"

	"github.com/probed-dev/probed/internal/probetext"
	"github.com/probed-dev/probed/pkg/hostpolicy"
	"github.com/probed-dev/probed/pkg/prober"
	"github.com/probed-dev/probed/pkg/probespec"
	"github.com/probed-dev/probed/pkg/results"
)

// outcome is what one probe came to, as the kubelet's prober.probe reports
// it: the container result, the output, the error and the events.
type outcome struct {
	result string
	output string
	err    string
	events []string
}

func (o outcome) String() string {
	return fmt.Sprintf("%s %q err=%q events=%q", o.result, o.output, o.err, o.events)
}

// kubeletOutcome runs a handler as pkg/kubelet/prober's probe and
// runProbeWithRetries (v1.37.2) do: up to 3 tries while it errors, then the
// result and event for a readiness probe.
func kubeletOutcome(run func() (probe.Result, string, error)) outcome {
	var (
		r   probe.Result
		out string
		err error
	)
	for range 3 {
		if r, out, err = run(); err == nil {
			break
		}
	}
	switch {
	case err != nil:
		return outcome{"failure", out, err.Error(), []string{"Warning Unhealthy " + fmt.Sprintf("Readiness probe errored and resulted in %s state: %s", r, err)}}
	case r == probe.Success:
		return outcome{"success", out, "", nil}
	case r == probe.Warning:
		return outcome{"success", out, "", []string{"Warning ProbeWarning Readiness probe warning: " + out}}
	case r == probe.Failure:
		return outcome{"failure", out, "", []string{"Warning Unhealthy Readiness probe failed: " + out}}
	}
	return outcome{"failure", out, "", nil}
}

// kubeletProbe runs spec through the kubelet's own pkg/probe code as its
// runProbe does, the feature gates of the 1.37 alpha fields on.
func kubeletProbe(spec *v1.Probe, container *v1.Container, podIP string) outcome {
	timeout := time.Duration(spec.TimeoutSeconds) * time.Second
	switch {
	case spec.HTTPGet != nil:
		pr := httpprobe.New(false)
		return kubeletOutcome(func() (probe.Result, string, error) {
			req, err := httpprobe.NewRequestForHTTPGetAction(spec.HTTPGet, container, podIP, "probe")
			if err != nil {
				return probe.Unknown, "", err
			}
			if p := spec.HTTPGet.Protocol; p != nil && *p == v1.HTTPProtocolHTTP2 {
				return pr.ProbeH2C(req, timeout)
			}
			return pr.Probe(req, timeout)
		})
	case spec.GRPC != nil:
		service := ""
		if spec.GRPC.Service != nil {
			service = *spec.GRPC.Service
		}
		useTLS := spec.GRPC.Mode != nil && *spec.GRPC.Mode == v1.GRPCProbeModeTLS
		return kubeletOutcome(func() (probe.Result, string, error) {
			return grpcprobe.New().Probe(podIP, service, int(spec.GRPC.Port), timeout, grpcprobe.ProbeOptions{UseTLS: useTLS})
		})
	}
	panic("no handler")
}

// sink keeps events as "Type Reason Message".
type sink struct {
	mu     sync.Mutex
	events []string
}

func (s *sink) Event(typ, reason, msg string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.events = append(s.events, typ+" "+reason+" "+msg)
}

// userAgentVersion is the kubelet's "<major>.<minor>" in this binary, so
// that both sides send the same User-Agent.
func userAgentVersion() string {
	v := version.Get()
	return v.Major + "." + v.Minor
}

// probedProbe runs spec through probed's Prober as a worker does.
func probedProbe(spec *v1.Probe, container *v1.Container, podIP string, opts prober.Options) outcome {
	opts.UserAgent = prober.NewUserAgent(userAgentVersion())
	s := &sink{}
	session := prober.NewSession()
	defer session.Close()
	res, out, err := prober.New(nil, opts).Probe(context.Background(), probespec.Readiness, spec,
		prober.Target{PodIP: podIP, PodIPs: []string{podIP}, Ports: container.Ports, Session: session}, s)
	o := outcome{result: "failure", output: out, events: s.events}
	if res == results.Success {
		o.result = "success"
	}
	if err != nil {
		o.err = err.Error()
	}
	return o
}

// same compares probed's outcome with the kubelet's, the latter with the
// response bytes probed withholds from HTTP transport errors.
func same(probed, kubelet outcome, http bool) bool {
	w := func(s string) string { return s }
	if http {
		w = probetext.Withheld
	}
	if probed.result != kubelet.result || probetext.Normalise(probed.output) != probetext.Normalise(w(kubelet.output)) ||
		probetext.Normalise(probed.err) != probetext.Normalise(w(kubelet.err)) || len(probed.events) != len(kubelet.events) {
		return false
	}
	for i := range probed.events {
		if probetext.Normalise(probed.events[i]) != probetext.Normalise(w(kubelet.events[i])) {
			return false
		}
	}
	return true
}

// compareOn runs the kubelet's probe and then probed's against the same
// server, and wants the same outcome and the same number of requests
// (requests counts what the server saw so far).
//
// probed runs twice: as under --probe-host-policy=kubelet (no guard), and
// under the default deny-node-local, whose guarded dialer, redirect policy
// and per-worker Transport are the daemon's default path; the server is on
// the pod's own IP, which that policy allows.
func compareOn(t *testing.T, spec *v1.Probe, container *v1.Container, http bool, requests func() int32) {
	t.Helper()
	before := requests()
	k := kubeletProbe(spec, container, "127.0.0.1")
	mid := requests()
	kr := mid - before
	for _, policy := range []hostpolicy.Policy{hostpolicy.Kubelet, hostpolicy.DenyNodeLocal} {
		opts := prober.Options{}
		if policy != hostpolicy.Kubelet {
			opts.HostGuard = hostpolicy.NewGuard(policy, hostpolicy.GuardOptions{})
		}
		p := probedProbe(spec, container, "127.0.0.1", opts)
		after := requests()
		if !same(p, k, http) {
			t.Errorf("--probe-host-policy=%s\nprobed:  %v\nkubelet: %v", policy, p, k)
		}
		if pr := after - mid; kr != pr {
			t.Errorf("--probe-host-policy=%s: the server saw %d requests from the kubelet, %d from probed", policy, kr, pr)
		}
		mid = after
	}
}
