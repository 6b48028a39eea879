package main

import (
	"flag"
	"strings"
	"testing"
)

func parse(t *testing.T, args ...string) *options {
	t.Helper()
	o := &options{}
	fs := flag.NewFlagSet("probed", flag.ContinueOnError)
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
		"status-mode": o.StatusMode, "probe-source": o.ProbeSource, "metrics-bind-address": o.MetricsAddr,
	}
	for name, got := range map[string]string{
		"node-name": "node-a", "runtime-endpoint": "unix:///run/containerd/containerd.sock", "containerd-namespace": "k8s.io",
		"status-mode": "conditions", "probe-source": "annotation", "metrics-bind-address": ":9809",
	} {
		if want[name] != got {
			t.Errorf("--%s default = %q, want %q", name, want[name], got)
		}
	}
	if o.DryRun || o.LivenessAction != "restart" {
		t.Errorf("dry-run=%v liveness-action=%q", o.DryRun, o.LivenessAction)
	}
}

func TestOptionValidation(t *testing.T) {
	t.Setenv("NODE_NAME", "")
	o := parse(t, "--status-mode=bogus", "--probe-source=x", "--max-concurrent-execs=0", "--liveness-action=nope")
	err := o.validate()
	if err == nil {
		t.Fatal("invalid options accepted")
	}
	for _, want := range []string{"--node-name is required", "--status-mode", "--probe-source", "--max-concurrent-execs", "--liveness-action"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not mention %s", err, want)
		}
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
}
