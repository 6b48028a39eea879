package main

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/spf13/pflag"

	"github.com/probed-dev/probed/pkg/hostpolicy"
)

// parsed returns the options after parsing args over the defaults.
func parsed(t *testing.T, args ...string) *options {
	t.Helper()
	o := &options{}
	fs := pflag.NewFlagSet("probed-webhook", pflag.ContinueOnError)
	o.addFlags(fs)
	if err := fs.Parse(args); err != nil {
		t.Fatal(err)
	}
	return o
}

func TestOptionsValidate(t *testing.T) {
	for _, tc := range []struct {
		name string
		args []string
		want string // "" for valid
	}{
		{"defaults with a namespace", []string{"--namespace=probed-system"}, ""},
		{"no namespace", []string{"--namespace="}, "--namespace"},
		{"bad bind address", []string{"--namespace=n", "--bind-address=9443"}, "--bind-address"},
		{"port out of range", []string{"--namespace=n", "--bind-address=:70000"}, "--bind-address"},
		{"cert-manager without a directory", []string{"--namespace=n", "--manage-certs=false"}, "--cert-dir"},
		{"cert-manager", []string{"--namespace=n", "--manage-certs=false", "--cert-dir=/tls"}, ""},
		{"check interval too long for the validity", []string{"--namespace=n", "--cert-validity=1h", "--cert-check-interval=10m"}, "--cert-check-interval"},
		{"negative propagation", []string{"--namespace=n", "--ca-propagation=-1s"}, "--ca-propagation"},
		{"zero grace", []string{"--namespace=n", "--gate-grace=0"}, "--gate-grace"},
		{"the nodes' host policy", []string{"--namespace=n", "--probe-host-policy=pod-ips"}, ""},
		{"a bad probed selector", []string{"--namespace=n", "--probed-selector=a b"}, "--probed-selector"},
		{"no probed selector", []string{"--namespace=n", "--probed-selector="}, "--probed-selector"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := parsed(t, tc.args...).validate()
			switch {
			case tc.want == "" && err != nil:
				t.Errorf("validate: %v, want nil", err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Errorf("validate: %v, want an error naming %s", err, tc.want)
			}
		})
	}
}

// An enum flag is parsed once, into its type: a bad value fails the parse.
func TestHostPolicyParsedOnce(t *testing.T) {
	o := &options{}
	fs := pflag.NewFlagSet("probed-webhook", pflag.ContinueOnError)
	o.addFlags(fs)
	if err := fs.Parse([]string{"--probe-host-policy=open"}); err == nil || !strings.Contains(err.Error(), "probe-host-policy") {
		t.Errorf("--probe-host-policy=open: %v, want a parse error naming the flag", err)
	}
	if o := parsed(t, "--namespace=n"); o.ProbeHostPolicy != hostpolicy.DenyNodeLocal {
		t.Errorf("default %q, want deny-node-local", o.ProbeHostPolicy)
	}
	if o := parsed(t, "--namespace=n", "--probe-host-policy=pod-ips"); o.ProbeHostPolicy != hostpolicy.PodIPs {
		t.Errorf("pod-ips parsed as %q", o.ProbeHostPolicy)
	}
}

func TestOptionsNames(t *testing.T) {
	o := parsed(t, "--namespace=probed-system", "--cert-extra-dns-names= a.example , b.example", "--excluded-namespaces=kube-system,,other")
	names := o.dnsNames()
	// The API server checks <service>.<namespace>.svc: the first name.
	if names[0] != "probed-webhook.probed-system.svc" || !slices.Contains(names, "a.example") || !slices.Contains(names, "b.example") {
		t.Errorf("dnsNames %v", names)
	}
	if got := o.excludedNamespaces(); !slices.Equal(got, []string{"kube-system", "other", "probed-system"}) {
		t.Errorf("excludedNamespaces %v: want kube-system, other and its own", got)
	}
	if o.CertValidity != 365*24*time.Hour || !o.ManageCerts {
		t.Errorf("defaults changed: %+v", o)
	}
	// probed's pods: deploy/'s and the chart's, in the webhook's namespace by default.
	if p := o.probedPods(); p.Namespace != "probed-system" || p.Selector.String() != "app.kubernetes.io/name=probed" {
		t.Errorf("probed's pods: %v %v", p.Namespace, p.Selector)
	}
	if p := parsed(t, "--namespace=n", "--probed-namespace=elsewhere").probedPods(); p.Namespace != "elsewhere" {
		t.Errorf("--probed-namespace: %q", p.Namespace)
	}
}
