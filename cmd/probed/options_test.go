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
