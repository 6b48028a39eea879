package main

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"slices"
	"time"

	"github.com/probed-dev/probed/internal/flagschema"
	"github.com/probed-dev/probed/pkg/endpoints"
	"github.com/probed-dev/probed/pkg/worker"
)

// options are the daemon's flags; validate checks them all in one place.
type options struct {
	NodeName           string
	Kubeconfig         string
	RuntimeEndpoint    string
	RuntimeType        string
	ContainerdNS       string
	StatusMode         string
	ProbeSource        string
	DryRun             bool
	MetricsAddr        string
	LivenessAction     string
	MaxConcurrentExecs int
	// ExecShareRuns lets an exec join an identical one in flight.
	ExecShareRuns      bool
	MetricsPodUIDLabel bool
	// MetricsProbeDuration is --metrics-probe-duration, parsed once by
	// worker.ParseDurationSeries.
	MetricsProbeDuration string
	StatusResync         time.Duration
	KubeAPIQPS           float64
	KubeAPIBurst         int
	// EventQPS and EventBurst limit the events client, which is apart from
	// the one that writes status.
	EventQPS       float64
	EventBurst     int
	ProbeUserAgent string
	// ProbeHostPolicy is --probe-host-policy (docs/security.md).
	ProbeHostPolicy string
	// TCPProbeClose is --tcp-probe-close: fin (the kubelet's) or rst.
	TCPProbeClose string
	// ProbeFastPaths is --probe-fast-paths: false sends every HTTP and gRPC
	// probe through net/http and grpc-go, as the kubelet does.
	ProbeFastPaths bool
	// LivenessRestartBudget is restarts per node per minute; 0 is unlimited.
	LivenessRestartBudget int
	// LivenessWorkloadGuard pauses liveness restarts of a workload while
	// more than half of its pods on the node fail liveness.
	LivenessWorkloadGuard bool
	// LivenessWorkloadGuardMaxPause bounds one such pause.
	LivenessWorkloadGuardMaxPause time.Duration
	// MetricsInsecure is --metrics-insecure-serving: plain HTTP, no
	// authentication, loopback only (development).
	MetricsInsecure bool
	// TLSCertFile and TLSKeyFile serve the endpoints; a self-signed
	// certificate when both are empty.
	TLSCertFile, TLSKeyFile string
	// ProbeResultChangeEvents is --probe-result-change-events.
	ProbeResultChangeEvents bool
}

func (o *options) addFlags(fs *flag.FlagSet) {
	fs.StringVar(&o.NodeName, "node-name", os.Getenv("NODE_NAME"), "the node whose pods probed probes (default $NODE_NAME); required")
	fs.StringVar(&o.Kubeconfig, "kubeconfig", "", "kubeconfig file; in-cluster config when empty")
	fs.StringVar(&o.RuntimeEndpoint, "runtime-endpoint", "unix:///run/containerd/containerd.sock", "container runtime socket")
	flagschema.EnumVar(fs, &o.RuntimeType, "runtime-type", "auto", "runtime API: containerd-cri (execs through CRI as the kubelet runs them, the native containerd client for a timed-out exec's whole-tree kill and for stops), containerd (native client only), cri (CRI over gRPC, e.g. CRI-O), auto (containerd-cri on containerd with CRI, containerd without CRI, else cri), or none (network probes only)",
		"auto", "containerd-cri", "containerd", "cri", "none")
	fs.StringVar(&o.ContainerdNS, "containerd-namespace", "k8s.io", "containerd namespace of the kubelet's containers")
	flagschema.EnumVar(fs, &o.StatusMode, "status-mode", "conditions", "how results reach the API server: conditions (probed's own pod conditions) or container-status (containerStatuses ready/started)",
		"conditions", "container-status")
	flagschema.EnumVar(fs, &o.ProbeSource, "probe-source", "annotation", "where probes come from: annotation (probed.io/probes), spec (the pod spec's probe fields) or both",
		"annotation", "spec", "both")
	fs.BoolVar(&o.DryRun, "dry-run", false, "probe and record metrics, logs and /debug/probes, but write no status, emit no events and kill nothing")
	fs.StringVar(&o.MetricsAddr, "metrics-bind-address", ":9809", "address for /metrics, /healthz, /readyz and /debug/probes")
	fs.BoolVar(&o.MetricsInsecure, "metrics-insecure-serving", false, "development only: serve /metrics and /debug/probes over plain HTTP with no authentication; --metrics-bind-address must then be a loopback address")
	fs.StringVar(&o.TLSCertFile, "tls-cert-file", "", "PEM serving certificate (chain) for the endpoints, reloaded when it changes; a self-signed one is made in memory when empty")
	fs.StringVar(&o.TLSKeyFile, "tls-private-key-file", "", "PEM private key of --tls-cert-file, reloaded when it changes")
	flagschema.EnumVar(fs, &o.LivenessAction, "liveness-action", "restart", "what a liveness or startup failure does: restart (stop the container) or event-only",
		"restart", "event-only")
	flagschema.IntVar(fs, &o.MaxConcurrentExecs, "max-concurrent-execs", 10, 1, "per-node cap on exec probes running at once")
	fs.BoolVar(&o.ExecShareRuns, "exec-share-runs", false, "an exec probe whose command is already running in the same container, with a timeout at least its own, takes that run's result instead of running again")
	fs.BoolVar(&o.MetricsPodUIDLabel, "metrics-pod-uid-label", true, "keep the kubelet's pod_uid label on prober_probe_total")
	flagschema.EnumVar(fs, &o.MetricsProbeDuration, "metrics-probe-duration", worker.DurationPerPod.String(), "how prober_probe_duration_seconds is broken down: pod (the kubelet's labels, 14 series per probe), namespace (probe_type and namespace only: one histogram per namespace and probe type) or none (not exposed); see docs/observability.md for the series each costs",
		worker.DurationSeriesValues()...)
	flagschema.PositiveDurationVar(fs, &o.StatusResync, "status-resync", time.Minute, "how often written status is compared with the API server's and drift repaired")
	flagschema.PositiveFloatVar(fs, &o.KubeAPIQPS, "kube-api-qps", 20, "API server request rate limit")
	flagschema.IntVar(fs, &o.KubeAPIBurst, "kube-api-burst", 40, 1, "API server request burst")
	flagschema.PositiveFloatVar(fs, &o.EventQPS, "event-qps", 10, "event creation rate limit; events have a client of their own, so they never take from status writes' --kube-api-qps")
	flagschema.IntVar(fs, &o.EventBurst, "event-burst", 20, 1, "event creation burst")
	fs.StringVar(&o.ProbeUserAgent, "probe-user-agent-version", "1.34", "the <major>.<minor> in the probes' User-Agent: kube-probe/<major>.<minor>")
	flagschema.EnumVar(fs, &o.ProbeHostPolicy, "probe-host-policy", "deny-node-local", "which addresses httpGet, tcpSocket and grpc probes (and HTTP redirects) may reach: deny-node-local (not loopback, link-local, cloud metadata or the node's own addresses, except the pod's own IPs), pod-ips (only the pod's own IPs) or kubelet (anything, as the kubelet)",
		"deny-node-local", "pod-ips", "kubelet")
	flagschema.EnumVar(fs, &o.TCPProbeClose, "tcp-probe-close", "fin", "how tcpSocket probes close their connection: fin (a graceful close, as the kubelet; the node keeps each probe's socket in TIME-WAIT for 60s) or rst (a reset: no TIME-WAIT and about a third less CPU, but the application may log \"connection reset by peer\" on every probe)",
		"fin", "rst")
	fs.BoolVar(&o.ProbeFastPaths, "probe-fast-paths", true, "run plain-http httpGet and grpc probes on probed's one-goroutine fast paths (the same bytes on the wire, one request per probe, less CPU); false sends them through net/http and grpc-go, as the kubelet does")
	flagschema.IntVar(fs, &o.LivenessRestartBudget, "liveness-restart-budget", 10, 0, "container restarts after liveness or startup failures allowed per node per minute (a token bucket, burst of the same size); a restart over budget is deferred and retried; 0 is unlimited")
	fs.BoolVar(&o.LivenessWorkloadGuard, "liveness-workload-guard", true, "pause liveness restarts of a ReplicaSet, StatefulSet or DaemonSet while more than half of its pods on this node are failing liveness")
	flagschema.PositiveDurationVar(fs, &o.LivenessWorkloadGuardMaxPause, "liveness-workload-guard-max-pause", 10*time.Minute, "the longest the workload guard pauses a workload's liveness restarts; after it, they go ahead as under the kubelet (still within --liveness-restart-budget)")
	fs.BoolVar(&o.ProbeResultChangeEvents, "probe-result-change-events", false, "emit a Normal ProbeResultChanged event on a container each time one of its probes' results flips (Success to Failure or back), aggregated like probed's other events")
}

func (o *options) validate() error {
	var errs []error
	oneOf := func(flagName, v string, allowed ...string) {
		if !slices.Contains(allowed, v) {
			errs = append(errs, fmt.Errorf("--%s=%q: must be one of %v", flagName, v, allowed))
		}
	}
	if o.NodeName == "" {
		errs = append(errs, errors.New("--node-name is required (or set NODE_NAME from the downward API)"))
	}
	oneOf("runtime-type", o.RuntimeType, "auto", "containerd-cri", "containerd", "cri", "none")
	oneOf("status-mode", o.StatusMode, "conditions", "container-status")
	oneOf("probe-source", o.ProbeSource, "annotation", "spec", "both")
	oneOf("liveness-action", o.LivenessAction, "restart", "event-only")
	oneOf("probe-host-policy", o.ProbeHostPolicy, "deny-node-local", "pod-ips", "kubelet")
	oneOf("tcp-probe-close", o.TCPProbeClose, "fin", "rst")
	oneOf("metrics-probe-duration", o.MetricsProbeDuration, worker.DurationSeriesValues()...)
	if (o.TLSCertFile == "") != (o.TLSKeyFile == "") {
		errs = append(errs, errors.New("--tls-cert-file and --tls-private-key-file go together"))
	}
	if o.MetricsInsecure {
		if err := endpoints.CheckInsecureAddr(o.MetricsAddr); err != nil {
			errs = append(errs, fmt.Errorf("--metrics-insecure-serving with --metrics-bind-address=%w", err))
		}
		if o.TLSCertFile != "" {
			errs = append(errs, errors.New("--metrics-insecure-serving serves no TLS: drop --tls-cert-file and --tls-private-key-file"))
		}
	}
	if o.LivenessRestartBudget < 0 {
		errs = append(errs, fmt.Errorf("--liveness-restart-budget=%d: must be 0 (unlimited) or more", o.LivenessRestartBudget))
	}
	if o.LivenessWorkloadGuardMaxPause <= 0 {
		errs = append(errs, fmt.Errorf("--liveness-workload-guard-max-pause=%v: must be positive", o.LivenessWorkloadGuardMaxPause))
	}
	if o.MaxConcurrentExecs < 1 {
		errs = append(errs, fmt.Errorf("--max-concurrent-execs=%d: must be at least 1", o.MaxConcurrentExecs))
	}
	if o.StatusResync <= 0 {
		errs = append(errs, fmt.Errorf("--status-resync=%v: must be positive", o.StatusResync))
	}
	if o.KubeAPIQPS <= 0 || o.KubeAPIBurst < 1 {
		errs = append(errs, errors.New("--kube-api-qps and --kube-api-burst must be positive"))
	}
	if o.EventQPS <= 0 || o.EventBurst < 1 {
		errs = append(errs, errors.New("--event-qps and --event-burst must be positive"))
	}
	return errors.Join(errs...)
}
