package main

import (
	"strings"
	"testing"

	"github.com/spf13/pflag"
	"k8s.io/client-go/rest"

	"github.com/probed-dev/probed/pkg/cri"
	"github.com/probed-dev/probed/pkg/hostpolicy"
	"github.com/probed-dev/probed/pkg/prober"
	"github.com/probed-dev/probed/pkg/probespec"
	"github.com/probed-dev/probed/pkg/status"
)

func parse(t *testing.T, args ...string) *options {
	t.Helper()
	o := &options{}
	fs := pflag.NewFlagSet("probed", pflag.ContinueOnError)
	o.addFlags(fs)
	if err := fs.Parse(args); err != nil {
		t.Fatal(err)
	}
	return o
}

func TestOptionDefaultsMatchContract(t *testing.T) {
	t.Setenv("NODE_NAME", "node-a")
	o := parse(t)
	if err := o.validate(); err != nil {
		t.Fatalf("defaults invalid: %v", err)
	}
	want := map[string]string{
		"node-name": o.NodeName, "runtime-endpoint": o.RuntimeEndpoint, "containerd-namespace": o.ContainerdNS,
		"status-mode": string(o.StatusMode), "probe-source": string(o.ProbeSource), "metrics-bind-address": o.MetricsAddr,
	}
	for name, got := range map[string]string{
		"node-name": "node-a", "runtime-endpoint": "unix:///run/containerd/containerd.sock", "containerd-namespace": "k8s.io",
		"status-mode": "conditions", "probe-source": "annotation", "metrics-bind-address": ":9809",
	} {
		if want[name] != got {
			t.Errorf("--%s default = %q, want %q", name, want[name], got)
		}
	}
	if o.DryRun || o.LivenessAction != livenessRestart {
		t.Errorf("dry-run=%v liveness-action=%q", o.DryRun, o.LivenessAction)
	}
}

// A bad value is refused, naming its flag: enums and ranges when the flags
// are parsed (their values check themselves, and the chart's schema says the
// same), the rest by validate.
func TestOptionValidation(t *testing.T) {
	t.Setenv("NODE_NAME", "")
	if err := parse(t).validate(); err == nil || !strings.Contains(err.Error(), "--node-name is required") {
		t.Errorf("no node name: %v", err)
	}
	for _, arg := range []string{"--status-mode=bogus", "--probe-source=x", "--max-concurrent-execs=0", "--liveness-action=nope",
		"--runtime-type=podman", "--probe-host-policy=any", "--tcp-probe-close=half", "--status-resync=60", "--status-resync=0s",
		"--kube-api-qps=0", "--kube-api-burst=0", "--event-burst=0", "--liveness-restart-budget=-1", "--liveness-workload-guard-max-pause=-1m"} {
		name, _, _ := strings.Cut(strings.TrimPrefix(arg, "--"), "=")
		if err := parseError(arg); err == nil || !strings.Contains(err.Error(), name) {
			t.Errorf("%s: %v, want it refused", arg, err)
		}
	}
}

// parseError parses args and returns the parse error.
func parseError(args ...string) error {
	fs := pflag.NewFlagSet("probed", pflag.ContinueOnError)
	(&options{}).addFlags(fs)
	return fs.Parse(args)
}

// TestEnumFlagsParseOnce: every enum flag takes only its values, at parse
// time, case-sensitively, and names the flag and the values it takes.
func TestEnumFlagsParseOnce(t *testing.T) {
	for _, tc := range []struct{ flag, bad, want string }{
		{"runtime-type", "CRI", `["auto" "containerd-cri" "containerd" "cri" "none"]`},
		{"status-mode", "bogus", `["conditions" "container-status"]`},
		{"probe-source", "x", `["annotation" "spec" "both"]`},
		{"liveness-action", "nope", `["restart" "event-only"]`},
		{"tcp-probe-close", "RST", `["fin" "rst"]`},
		{"probe-host-policy", "Kubelet", `["deny-node-local" "pod-ips" "kubelet"]`},
	} {
		err := parseError("--" + tc.flag + "=" + tc.bad)
		if err == nil || !strings.Contains(err.Error(), "-"+tc.flag) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("--%s=%s: %v; want an error naming the flag and %s", tc.flag, tc.bad, err, tc.want)
		}
	}
	t.Setenv("NODE_NAME", "node-a")
	o := parse(t, "--runtime-type=none", "--status-mode=container-status", "--probe-source=both", "--liveness-action=event-only",
		"--tcp-probe-close=rst", "--probe-host-policy=pod-ips")
	if o.RuntimeType != cri.TypeNone || o.StatusMode != status.ModeContainerStatus || o.ProbeSource != probespec.ProbeSourceBoth ||
		o.LivenessAction != livenessEventOnly || o.TCPProbeClose != prober.TCPCloseRST || o.ProbeHostPolicy != hostpolicy.PodIPs {
		t.Errorf("parsed %+v", o)
	}
	if err := o.validate(); err != nil {
		t.Error(err)
	}
}

// Events have a client of their own: its rate limit is not the status
// writes', and it shares nothing with theirs.
func TestEventClientHasItsOwnLimits(t *testing.T) {
	t.Setenv("NODE_NAME", "node-a")
	o := parse(t, "--kube-api-qps=5", "--kube-api-burst=7", "--event-qps=2", "--event-burst=3")
	if err := o.validate(); err != nil {
		t.Fatal(err)
	}
	cfg := &rest.Config{Host: "https://127.0.0.1:1", QPS: 5, Burst: 7}
	ec := eventConfig(cfg, o)
	if ec.QPS != 2 || ec.Burst != 3 || ec.RateLimiter != nil {
		t.Errorf("events config QPS %v burst %d limiter %v; want 2, 3, its own", ec.QPS, ec.Burst, ec.RateLimiter)
	}
	if cfg.QPS != 5 || cfg.Burst != 7 {
		t.Errorf("the status client's config changed: %v/%d", cfg.QPS, cfg.Burst)
	}
}

// --metrics-insecure-serving serves without TLS or authentication, so it is
// refused unless probed listens on loopback only; the TLS file flags go
// together.
func TestMetricsServingValidation(t *testing.T) {
	t.Setenv("NODE_NAME", "node-a")
	for _, tc := range []struct {
		args []string
		want string // "" means valid
	}{
		{nil, ""},
		{[]string{"--metrics-insecure-serving", "--metrics-bind-address=127.0.0.1:9809"}, ""},
		{[]string{"--metrics-insecure-serving", "--metrics-bind-address=[::1]:9809"}, ""},
		{[]string{"--metrics-insecure-serving"}, `--metrics-insecure-serving with --metrics-bind-address=":9809" is not a loopback address`},
		{[]string{"--metrics-insecure-serving", "--metrics-bind-address=0.0.0.0:9809"}, "is not a loopback address"},
		{[]string{"--metrics-insecure-serving", "--metrics-bind-address=10.1.2.3:9809"}, "is not a loopback address"},
		{[]string{"--tls-cert-file=/c.pem", "--tls-private-key-file=/k.pem"}, ""},
		{[]string{"--health-bind-address=127.0.0.1:9810"}, ""},
		{[]string{"--tls-cert-file=/c.pem"}, "--tls-cert-file and --tls-private-key-file go together"},
		{[]string{"--tls-private-key-file=/k.pem"}, "--tls-cert-file and --tls-private-key-file go together"},
		{[]string{"--metrics-insecure-serving", "--metrics-bind-address=127.0.0.1:1", "--tls-cert-file=/c.pem", "--tls-private-key-file=/k.pem"},
			"--metrics-insecure-serving serves no TLS"},
	} {
		err := parse(t, tc.args...).validate()
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("%v: %v", tc.args, err)
		case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
			t.Errorf("%v: error %v, want %q", tc.args, err, tc.want)
		}
	}
	// Refused as they are parsed, as the chart's schema refuses them.
	for arg, want := range map[string]string{
		"--health-bind-address=:9810":         `":9810": must be empty or a loopback host:port`,
		"--health-bind-address=0.0.0.0:9810":  "must be empty or a loopback host:port",
		"--endpoint-token-audiences= , ":      "must be at least one audience",
		"--health-bind-address=127.0.0.1:x":   "must be empty or a loopback host:port",
		"--health-bind-address=127.000.0.1:1": "must be empty or a loopback host:port",
	} {
		fs := pflag.NewFlagSet("probed", pflag.ContinueOnError)
		(&options{}).addFlags(fs)
		if err := fs.Parse([]string{arg}); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: error %v, want %q", arg, err, want)
		}
	}
	// What the pattern lets through, the address check takes.
	for _, addr := range []string{"127.0.0.1:9810", "127.255.1.9:1", "[::1]:9810"} {
		if err := parse(t, "--health-bind-address="+addr).validate(); err != nil {
			t.Errorf("--health-bind-address=%s: %v", addr, err)
		}
	}
}
