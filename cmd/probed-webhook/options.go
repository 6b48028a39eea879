package main

import (
	"errors"
	"fmt"
	"net"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/pflag"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/probed-dev/probed/pkg/gatewatch"
	"github.com/probed-dev/probed/pkg/hostpolicy"
	"github.com/probed-dev/probed/pkg/probespec"
)

// options are the webhook's flags; validate checks them all in one place.
type options struct {
	Kubeconfig  string
	Namespace   string
	BindAddress string
	ServiceName string
	// ExtraDNSNames are more names for the serving certificate.
	ExtraDNSNames string
	// ManageCerts: generate, keep and rotate the certificates (the
	// default); false reads CertDir (cert-manager's Secret, mounted).
	ManageCerts   bool
	CertDir       string
	SecretName    string
	MutatingName  string
	ValidatingWHC string
	CAValidity    time.Duration
	CertValidity  time.Duration
	CertInterval  time.Duration
	CAPropagation time.Duration
	// ExcludedNamespaces are never adopted nor validated; the webhook's
	// own namespace always is.
	ExcludedNamespaces string
	GateMonitor        bool
	GateGrace          time.Duration
	MetricsAddr        string
	MetricsSecure      bool
	HealthAddr         string
	KubeAPIQPS         float64
	KubeAPIBurst       int
	// ProbeHostPolicy is the nodes' --probe-host-policy: adoption leaves
	// with the kubelet a probe whose host it refuses on every node.
	ProbeHostPolicy hostpolicy.Policy
	// ProbedNamespace and ProbedSelector find probed's DaemonSet pods, for
	// the gauge of gated pods on nodes without one; the namespace defaults
	// to the webhook's own.
	ProbedNamespace string
	ProbedSelector  string
	// APIServerGates are the API server's gates of alpha probe fields
	// that are on: adoption leaves with the kubelet a probe setting a
	// field the API server would drop.
	APIServerGates probespec.APIServerGates
}

func (o *options) addFlags(fs *pflag.FlagSet) {
	fs.StringVar(&o.Kubeconfig, "kubeconfig", "", "kubeconfig file; in-cluster config when empty")
	fs.StringVar(&o.Namespace, "namespace", os.Getenv("POD_NAMESPACE"), "the webhook's namespace, where its Secret is (default $POD_NAMESPACE); required")
	fs.StringVar(&o.BindAddress, "bind-address", ":9443", "host:port the admission webhooks are served on (TLS)")
	fs.StringVar(&o.ServiceName, "service-name", "probed-webhook", "the webhook's Service: the serving certificate names <service>.<namespace>.svc, as the API server checks")
	fs.StringVar(&o.ExtraDNSNames, "cert-extra-dns-names", "", "comma-separated extra DNS names for the serving certificate")
	fs.BoolVar(&o.ManageCerts, "manage-certs", true, "generate a CA and a serving certificate, keep them in --secret-name, put the CA bundle into the webhook configurations and rotate them before expiry; false serves tls.crt and tls.key from --cert-dir (cert-manager) and reloads them when they change")
	fs.StringVar(&o.CertDir, "cert-dir", "", "with --manage-certs=false: the directory holding tls.crt and tls.key")
	fs.StringVar(&o.SecretName, "secret-name", "probed-webhook-certs", "the Secret, in --namespace, that holds the certificates all replicas share (it must exist: deploy/ ships it empty)")
	fs.StringVar(&o.MutatingName, "mutating-webhook-configuration", "probed-webhook", "the MutatingWebhookConfiguration to put the CA bundle into (\"\" for none)")
	fs.StringVar(&o.ValidatingWHC, "validating-webhook-configuration", "probed-webhook", "the ValidatingWebhookConfiguration to put the CA bundle into (\"\" for none)")
	fs.DurationVar(&o.CAValidity, "ca-validity", 10*365*24*time.Hour, "validity of a new CA; it is renewed two thirds of the way through, and the old one is trusted until it expires")
	fs.DurationVar(&o.CertValidity, "cert-validity", 365*24*time.Hour, "validity of a new serving certificate; it is renewed two thirds of the way through")
	fs.DurationVar(&o.CertInterval, "cert-check-interval", time.Minute, "how often the Secret and the webhook configurations are checked")
	fs.DurationVar(&o.CAPropagation, "ca-propagation", 10*time.Second, "how long a new CA bundle must have been in the webhook configurations before a certificate it signed is served")
	fs.StringVar(&o.ExcludedNamespaces, "excluded-namespaces", "kube-system", "comma-separated namespaces never adopted nor validated, whatever the configurations say (--namespace always is)")
	fs.BoolVar(&o.GateMonitor, "gate-monitor", true, "watch every pod and export probed_webhook_pods_gate_unanswered: pods whose probed.io/ready gate has had no condition from probed for longer than --gate-grace")
	fs.StringVar(&o.ProbedNamespace, "probed-namespace", "", "the namespace of probed's DaemonSet, for probed_webhook_pods_gated_without_probed (default: --namespace)")
	fs.StringVar(&o.ProbedSelector, "probed-selector", "app.kubernetes.io/name=probed", "the labels of probed's DaemonSet pods, for probed_webhook_pods_gated_without_probed: gated pods on nodes where none is Running and Ready")
	fs.DurationVar(&o.GateGrace, "gate-grace", 2*time.Minute, "how long after scheduling a pod with the probed.io/ready gate may go without a condition from probed before it counts as unanswered")
	fs.StringVar(&o.MetricsAddr, "metrics-bind-address", ":8443", "address for /metrics (\"0\" disables it)")
	fs.BoolVar(&o.MetricsSecure, "metrics-secure", true, "serve /metrics over TLS to callers the API server authenticates (TokenReview) and authorizes for get on /metrics (SubjectAccessReview); false serves plain HTTP to anyone, for development on loopback")
	fs.StringVar(&o.HealthAddr, "health-probe-bind-address", ":8081", "address for /healthz and /readyz (plain HTTP)")
	fs.Float64Var(&o.KubeAPIQPS, "kube-api-qps", 20, "API server request rate limit")
	fs.IntVar(&o.KubeAPIBurst, "kube-api-burst", 40, "API server request burst")
	o.ProbeHostPolicy = hostpolicy.DenyNodeLocal
	fs.Var(&o.ProbeHostPolicy, "probe-host-policy", "the nodes' probed --probe-host-policy (deny-node-local, pod-ips or kubelet): a spec probe whose host it refuses on every node stays with the kubelet, with a warning")
	fs.Var(&o.APIServerGates, "api-server-feature-gates", "the API server's gates of alpha probe fields that are on, as in its --feature-gates (H2CContainerProbe=true,GRPCContainerProbeTLS=true): with a gate off (the default in 1.37) the API server drops the field after admission, so a spec probe setting it stays with the kubelet, with a warning")
}

func (o *options) validate() error {
	var errs []error
	if o.Namespace == "" {
		errs = append(errs, errors.New("--namespace (or $POD_NAMESPACE) is required"))
	}
	if _, _, err := o.hostPort(); err != nil {
		errs = append(errs, fmt.Errorf("--bind-address %q: %w", o.BindAddress, err))
	}
	if o.ServiceName == "" {
		errs = append(errs, errors.New("--service-name is required"))
	}
	if o.ManageCerts {
		if o.SecretName == "" {
			errs = append(errs, errors.New("--secret-name is required with --manage-certs"))
		}
		for name, d := range map[string]time.Duration{"--ca-validity": o.CAValidity, "--cert-validity": o.CertValidity, "--cert-check-interval": o.CertInterval} {
			if d <= 0 {
				errs = append(errs, fmt.Errorf("%s %v must be positive", name, d))
			}
		}
		if o.CAPropagation < 0 {
			errs = append(errs, fmt.Errorf("--ca-propagation %v must not be negative", o.CAPropagation))
		}
		// A certificate must be renewed (at two thirds) well before it
		// expires, with checks in between.
		if o.CertValidity > 0 && o.CertInterval*3 > o.CertValidity/3 {
			errs = append(errs, fmt.Errorf("--cert-check-interval %v is too long for --cert-validity %v: make it at most a ninth of it", o.CertInterval, o.CertValidity))
		}
	} else if o.CertDir == "" {
		errs = append(errs, errors.New("--cert-dir is required with --manage-certs=false"))
	}
	if _, err := labels.Parse(o.ProbedSelector); err != nil || o.ProbedSelector == "" {
		errs = append(errs, fmt.Errorf("--probed-selector %q: want a label selector: %v", o.ProbedSelector, err))
	}
	if o.GateGrace <= 0 {
		errs = append(errs, fmt.Errorf("--gate-grace %v must be positive", o.GateGrace))
	}
	if o.KubeAPIQPS <= 0 || o.KubeAPIBurst <= 0 {
		errs = append(errs, errors.New("--kube-api-qps and --kube-api-burst must be positive"))
	}
	return errors.Join(errs...)
}

// hostPort splits --bind-address.
func (o *options) hostPort() (string, int, error) {
	host, p, err := net.SplitHostPort(o.BindAddress)
	if err != nil {
		return "", 0, err
	}
	port, err := strconv.Atoi(p)
	if err != nil || port < 1 || port > 65535 {
		return "", 0, fmt.Errorf("port %q is not 1-65535", p)
	}
	return host, port, nil
}

// dnsNames are the serving certificate's names; the first is what the API
// server checks.
func (o *options) dnsNames() []string {
	svc, ns := o.ServiceName, o.Namespace
	names := []string{svc + "." + ns + ".svc", svc, svc + "." + ns, svc + "." + ns + ".svc.cluster.local"}
	return append(names, splitList(o.ExtraDNSNames)...)
}

func (o *options) excludedNamespaces() []string {
	return append(splitList(o.ExcludedNamespaces), o.Namespace)
}

func splitList(s string) []string {
	var out []string
	for _, f := range strings.Split(s, ",") {
		if f = strings.TrimSpace(f); f != "" {
			out = append(out, f)
		}
	}
	return out
}

// probedPods are probed's DaemonSet pods, as --probed-namespace and
// --probed-selector say (validate has parsed the selector).
func (o *options) probedPods() gatewatch.ProbedPods {
	ns := o.ProbedNamespace
	if ns == "" {
		ns = o.Namespace
	}
	sel, _ := labels.Parse(o.ProbedSelector)
	return gatewatch.ProbedPods{Namespace: ns, Selector: sel}
}
