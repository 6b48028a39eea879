package main

import (
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/spf13/pflag"

	"github.com/probed-dev/probed/internal/flagschema"
	"github.com/probed-dev/probed/pkg/cri"
	"github.com/probed-dev/probed/pkg/endpoints"
	"github.com/probed-dev/probed/pkg/hostpolicy"
	"github.com/probed-dev/probed/pkg/podinformer"
	"github.com/probed-dev/probed/pkg/prober"
	"github.com/probed-dev/probed/pkg/probespec"
	"github.com/probed-dev/probed/pkg/reachpolicy"
	"github.com/probed-dev/probed/pkg/status"
	"github.com/probed-dev/probed/pkg/worker"
)

// runtimeType is --runtime-type: one of pkg/cri's types, or none.
type runtimeType string

// livenessAction is --liveness-action: what a liveness or startup failure does.
type livenessAction string

const (
	livenessRestart   livenessAction = "restart"
	livenessEventOnly livenessAction = "event-only"
)

// loopbackAddrPattern is --health-bind-address: empty, or an IPv4 or IPv6
// loopback address with a port, as endpoints.CheckHealthAddr wants it.
const loopbackAddrPattern = `^((127(\.(25[0-5]|2[0-4][0-9]|1[0-9][0-9]|[1-9]?[0-9])){3}|\[::1\]):[0-9]{0,5})?$`

// options are the daemon's flags; validate checks them all in one place.
type options struct {
	NodeName           string
	Kubeconfig         string
	RuntimeEndpoint    string
	RuntimeType        runtimeType
	ContainerdNS       string
	StatusMode         status.Mode
	ProbeSource        probespec.ProbeSource
	DryRun             bool
	MetricsAddr        string
	LivenessAction     livenessAction
	MaxConcurrentExecs int
	// MaxConcurrentExecsPerPod is one pod's share of those slots.
	MaxConcurrentExecsPerPod int
	// ExecSlotMaxHold is how long an exec keeps its slot while others
	// wait; 0 is for ever.
	ExecSlotMaxHold time.Duration
	// ExecShareRuns lets an exec join an identical one in flight.
	ExecShareRuns      bool
	MetricsPodUIDLabel bool
	// MetricsProbeDuration is --metrics-probe-duration.
	MetricsProbeDuration worker.DurationSeries
	StatusResync         time.Duration
	KubeAPIQPS           float64
	KubeAPIBurst         int
	// EventQPS and EventBurst limit the events client, which is apart from
	// the one that writes status.
	EventQPS   float64
	EventBurst int
	// AuthReviewQPS and AuthReviewBurst limit the client of the endpoints'
	// TokenReviews and SubjectAccessReviews, also apart from status writes.
	AuthReviewQPS   float64
	AuthReviewBurst int
	ProbeUserAgent  string
	// ProbeHostPolicy is --probe-host-policy (docs/security.md).
	ProbeHostPolicy hostpolicy.Policy
	// TrustPodStatusIPs is --trust-pod-status-ips (docs/security.md).
	TrustPodStatusIPs bool
	// TCPProbeClose is --tcp-probe-close: fin (the kubelet's) or rst.
	TCPProbeClose prober.TCPCloseMode
	// PodSource is --pod-source: auto, apiserver or kubelet.
	PodSource podinformer.Source
	// KubeletPodsAPISocket is --kubelet-pods-api-socket.
	KubeletPodsAPISocket string
	// KubeletPodsRelist is --kubelet-pods-relist-period.
	KubeletPodsRelist time.Duration
	// PodVolumesDir is --pod-volumes-dir: the kubelet's pods directory,
	// where probed.io/tls reads certificates; "" reads none.
	PodVolumesDir string
	// LivenessRestartBudget is restarts per node per minute; 0 is unlimited.
	LivenessRestartBudget int
	// LivenessWorkloadGuard pauses liveness restarts of a workload while
	// more than half of its pods on the node fail liveness.
	LivenessWorkloadGuard bool
	// LivenessWorkloadGuardMaxPause bounds one such pause.
	LivenessWorkloadGuardMaxPause time.Duration
	// PDBRestarts makes a kill of a pod PodDisruptionBudgets select a
	// disruption they must allow, across the cluster.
	PDBRestarts bool
	// PDBRestartMaxDeferral: a kill deferred this long goes ahead; 0 never.
	PDBRestartMaxDeferral time.Duration
	// MetricsInsecure is --metrics-insecure-serving: plain HTTP, no
	// authentication, loopback only (development).
	MetricsInsecure bool
	// TLSCertFile and TLSKeyFile serve the endpoints; a self-signed
	// certificate when both are empty.
	TLSCertFile, TLSKeyFile string
	// PublishServingCA publishes the self-signed certificate's CA
	// (pkg/servingca) for the kubectl plugin to verify.
	PublishServingCA bool
	// HealthAddr is --health-bind-address: /healthz and /readyz alone, on
	// loopback, for the kubelet's probes.
	HealthAddr string
	// EndpointTokenAudiences are the audiences a caller's token must be
	// issued for (comma-separated).
	EndpointTokenAudiences string
	// MetricsAPIServerTokens lets /metrics accept tokens issued for the
	// API server too.
	MetricsAPIServerTokens bool
	// ProbeResultChangeEvents is --probe-result-change-events.
	ProbeResultChangeEvents bool
	// RequireApprovedReach is --require-approved-reach (docs/security.md).
	RequireApprovedReach bool
	// ProbeReachPolicy is --probe-reach-policy.
	ProbeReachPolicy string
}

func (o *options) addFlags(fs *pflag.FlagSet) {
	flagschema.RequiredStringVar(fs, &o.NodeName, "node-name", os.Getenv("NODE_NAME"), "the node whose pods probed probes (default $NODE_NAME); required")
	fs.StringVar(&o.Kubeconfig, "kubeconfig", "", "kubeconfig file; in-cluster config when empty")
	fs.StringVar(&o.RuntimeEndpoint, "runtime-endpoint", "unix:///run/containerd/containerd.sock", "container runtime socket")
	flagschema.EnumVar(fs, &o.RuntimeType, "runtime-type", cri.TypeAuto, "runtime API: containerd-cri (execs through CRI as the kubelet runs them, the native containerd client for a timed-out exec's whole-tree kill and for stops), containerd (native client only), cri (CRI over gRPC, e.g. CRI-O), auto (containerd-cri on containerd with CRI, containerd without CRI, else cri), or none (network probes only)",
		cri.TypeAuto, cri.TypeContainerdCRI, cri.TypeNative, cri.TypeCRI, cri.TypeNone)
	fs.StringVar(&o.ContainerdNS, "containerd-namespace", "k8s.io", "containerd namespace of the kubelet's containers")
	flagschema.EnumVar(fs, &o.StatusMode, "status-mode", status.ModeConditions, "how results reach the API server: conditions (probed's own pod conditions) or container-status (containerStatuses ready/started)",
		status.ModeConditions, status.ModeContainerStatus)
	flagschema.EnumVar(fs, &o.ProbeSource, "probe-source", probespec.ProbeSourceAnnotation, "where probes come from: annotation (probed.io/probes), spec (the pod spec's probe fields) or both",
		probespec.ProbeSourceAnnotation, probespec.ProbeSourceSpec, probespec.ProbeSourceBoth)
	fs.BoolVar(&o.DryRun, "dry-run", false, "probe and record metrics, logs and /debug/probes, but write no status, emit no events and kill nothing")
	fs.StringVar(&o.MetricsAddr, "metrics-bind-address", ":9809", "address for /metrics, /healthz, /readyz and /debug/probes")
	fs.BoolVar(&o.MetricsInsecure, "metrics-insecure-serving", false, "development only: serve /metrics and /debug/probes over plain HTTP with no authentication; --metrics-bind-address must then be a loopback address")
	fs.StringVar(&o.TLSCertFile, "tls-cert-file", "", "PEM serving certificate (chain) for the endpoints, reloaded when it changes; a self-signed one is made in memory when empty")
	fs.StringVar(&o.TLSKeyFile, "tls-private-key-file", "", "PEM private key of --tls-cert-file, reloaded when it changes")
	fs.BoolVar(&o.PublishServingCA, "publish-serving-ca", true, "publish the self-signed serving certificate's CA in a ConfigMap named after probed's pod, in its namespace and owned by it ($POD_NAME, $POD_NAMESPACE and $POD_UID from the downward API), so that kubectl probed verifies probed's TLS")
	flagschema.PatternStringVar(fs, &o.HealthAddr, "health-bind-address", "", loopbackAddrPattern, "empty or a loopback host:port (127.x.x.x or [::1])", "a loopback address that serves /healthz and /readyz alone, over plain HTTP, for the kubelet's probes (e.g. 127.0.0.1:9810): no caller of --metrics-bind-address can starve them; empty: none")
	flagschema.PatternStringVar(fs, &o.EndpointTokenAudiences, "endpoint-token-audiences", endpoints.DefaultAudience, `[^,\s]`, "at least one audience", "comma-separated audiences a bearer token sent to /metrics, /debug/ and /readyz?verbose must be issued for (kubectl probed's tokens are issued for \"probed\"); a token issued for the API server is refused, so a token that works against the API server is never needed here")
	fs.BoolVar(&o.MetricsAPIServerTokens, "metrics-api-server-tokens", true, "/metrics also accepts tokens issued for the API server's own audiences, as a Prometheus Operator PodMonitor sends (a Secret's token); false: /metrics, too, needs --endpoint-token-audiences")
	flagschema.EnumVar(fs, &o.LivenessAction, "liveness-action", livenessRestart, "what a liveness or startup failure does: restart (stop the container) or event-only",
		livenessRestart, livenessEventOnly)
	flagschema.IntVar(fs, &o.MaxConcurrentExecs, "max-concurrent-execs", 10, 1, "per-node number of exec slots: an exec probe starts only once it holds one (it may give it up after --exec-slot-max-hold while others wait, and run on)")
	flagschema.IntVar(fs, &o.MaxConcurrentExecsPerPod, "max-concurrent-execs-per-pod", 2, 1, "one pod's share of --max-concurrent-execs: its further execs wait while other pods' run, and waiting pods are served in turn")
	flagschema.NonNegativeDurationVar(fs, &o.ExecSlotMaxHold, "exec-slot-max-hold", 500*time.Millisecond, "how long an exec keeps its slot while other execs wait; it then runs on without one, to its own timeout, so hung exec probes cannot hold every slot; 0 keeps slots until the exec ends")
	fs.BoolVar(&o.ExecShareRuns, "exec-share-runs", false, "an exec probe whose command is already running in the same container, with a timeout at least its own, takes that run's result instead of running again")
	fs.BoolVar(&o.MetricsPodUIDLabel, "metrics-pod-uid-label", true, "keep the kubelet's pod_uid label on prober_probe_total")
	flagschema.EnumVar(fs, &o.MetricsProbeDuration, "metrics-probe-duration", worker.DurationPerPod, "how prober_probe_duration_seconds is broken down: pod (the kubelet's labels, 14 series per probe), namespace (probe_type and namespace only: one histogram per namespace and probe type) or none (not exposed); see docs/observability.md for the series each costs",
		worker.DurationSeriesValues()...)
	flagschema.PositiveDurationVar(fs, &o.StatusResync, "status-resync", time.Minute, "how often written status is compared with the API server's and drift repaired")
	flagschema.PositiveFloatVar(fs, &o.KubeAPIQPS, "kube-api-qps", 20, "API server request rate limit")
	flagschema.IntVar(fs, &o.KubeAPIBurst, "kube-api-burst", 40, 1, "API server request burst")
	flagschema.PositiveFloatVar(fs, &o.EventQPS, "event-qps", 10, "event creation rate limit; events have a client of their own, so they never take from status writes' --kube-api-qps")
	flagschema.IntVar(fs, &o.EventBurst, "event-burst", 20, 1, "event creation burst")
	flagschema.PositiveFloatVar(fs, &o.AuthReviewQPS, "auth-review-qps", 5, "rate limit of the TokenReviews and SubjectAccessReviews that authorize /metrics and /debug/ callers; they have a client of their own, so callers with made-up tokens never take from status writes' --kube-api-qps")
	flagschema.IntVar(fs, &o.AuthReviewBurst, "auth-review-burst", 10, 1, "burst of those reviews")
	fs.StringVar(&o.ProbeUserAgent, "probe-user-agent-version", "", "the <major>.<minor> in the probes' User-Agent (kube-probe/<major>.<minor>) and the lifecycle hooks' (kube-lifecycle/...); empty: the node's kubelet's, from its Node's status.nodeInfo.kubeletVersion, with the kubelet's \"+\" for a pre-release or vendor version (v1.35.4-eks-... sends 1.35+), followed as the Node changes ("+prober.DefaultUserAgentVersion+" if it cannot be read)")
	flagschema.EnumVar(fs, &o.ProbeHostPolicy, "probe-host-policy", hostpolicy.DenyNodeLocal, "which addresses httpGet, tcpSocket and grpc probes (and HTTP redirects) may reach: deny-node-local (not loopback, link-local, cloud metadata or the node's own addresses, except the pod's own IPs), pod-ips (only the pod's own IPs) or kubelet (anything, as the kubelet)",
		hostpolicy.DenyNodeLocal, hostpolicy.PodIPs, hostpolicy.Kubelet)
	fs.BoolVar(&o.TrustPodStatusIPs, "trust-pod-status-ips", false, "take a pod's status.podIPs as its own IPs, which --probe-host-policy always allows, without asking the container runtime which IPs it gave the pod's sandbox; only for test setups whose pods have no sandbox: whoever may write pods/status could then point probes at the node's loopback or metadata addresses")
	flagschema.EnumVar(fs, &o.TCPProbeClose, "tcp-probe-close", prober.TCPCloseFIN, "how tcpSocket probes close their connection: fin (a graceful close, as the kubelet; the node keeps each probe's socket in TIME-WAIT for 60s) or rst (a reset: no TIME-WAIT and about a third less CPU, but the application may log \"connection reset by peer\" on every probe)",
		prober.TCPCloseFIN, prober.TCPCloseRST)
	flagschema.EnumVar(fs, &o.PodSource, "pod-source", podinformer.SourceAuto, "where probed reads its node's pods: kubelet (the kubelet's Pods API, Kubernetes 1.36+ with the PodsAPI gate, on by default from 1.37: the kubelet's own view of status, no API server watch, and probed needs no list or watch of pods; deploy/pod-source-kubelet), apiserver (a watch of the API server, field selector spec.nodeName) or auto (the kubelet when its socket answers at start, else the API server; probed says which and why in its log and probed_pod_source_info)",
		podinformer.Sources...)
	fs.StringVar(&o.KubeletPodsAPISocket, "kubelet-pods-api-socket", podinformer.DefaultKubeletSocket, "the kubelet's Pods API socket: <kubelet --root-dir>/pods-api/pods-api.sock")
	flagschema.PositiveDurationVar(fs, &o.KubeletPodsRelist, "kubelet-pods-relist-period", 15*time.Second, "with the kubelet as pod source, how often probed reopens its watch and compares the kubelet's pods with its own: the kubelet's watch sends a pod only when its status changes, so an edit of probed.io/probes or another annotation reaches probed within this period (each reopening is a few lines in the kubelet's log)")
	fs.StringVar(&o.PodVolumesDir, "pod-volumes-dir", "", "the kubelet's pods directory (<kubelet root>/pods, usually /var/lib/kubelet/pods), from whose secret, configMap and projected volumes probes with probed.io/tls read a pod's own CA bundle and client certificate; it must be mounted with HostToContainer propagation and lets probed read every such volume on the node (docs/tls.md); empty: probes that name a volume fail")
	flagschema.IntVar(fs, &o.LivenessRestartBudget, "liveness-restart-budget", 10, 0, "container restarts after liveness or startup failures allowed per node per minute (a token bucket, burst of the same size); a restart over budget is deferred and retried; 0 is unlimited")
	fs.BoolVar(&o.LivenessWorkloadGuard, "liveness-workload-guard", true, "pause liveness restarts of a ReplicaSet, StatefulSet or DaemonSet while more than half of its pods on this node are failing liveness")
	fs.BoolVar(&o.PDBRestarts, "pdb-restarts", false, "treat a liveness or startup restart of a pod that PodDisruptionBudgets select as a disruption each must allow, counted across all nodes as the Eviction API counts evictions (Leases in probed's namespace); a restart they do not allow is deferred and asked again at the next failure threshold (docs/pdb-restarts.md)")
	flagschema.NonNegativeDurationVar(fs, &o.PDBRestartMaxDeferral, "pdb-restart-max-deferral", 0, "with --pdb-restarts, how long a restart may stay deferred by PodDisruptionBudgets before it goes ahead anyway (with a Warning event); 0 defers it for as long as they refuse, as an eviction waits")
	flagschema.PositiveDurationVar(fs, &o.LivenessWorkloadGuardMaxPause, "liveness-workload-guard-max-pause", 10*time.Minute, "the longest the workload guard pauses a workload's liveness restarts; after it, they go ahead as under the kubelet (still within --liveness-restart-budget)")
	fs.BoolVar(&o.RequireApprovedReach, "require-approved-reach", false, "run probes that execute a command or connect beyond the pod's own IP (exec, httpGet or tcpSocket host, HTTP headers, body checks) only on pods whose probed.io/approved-reach covers them; for clusters without the probed-probe-reach admission policy (which needs Kubernetes 1.30), where nothing else stops a user who may patch a pod, but not exec into it, from changing them")
	fs.StringVar(&o.ProbeReachPolicy, "probe-reach-policy", reachpolicy.DefaultPolicy, "the ValidatingAdmissionPolicy that makes probe edits need pods/exec (deploy/probe-reach.yaml); probed watches that it is in force (its spec deploy/'s, a binding that denies), and while it is not, says so (probed_probe_reach_policy_in_force, a Warning ProbeReachPolicyMissing event on the node) and holds each pod's probes to what they ran or reached when it first saw the pod; \"\" checks nothing and always holds")
	fs.BoolVar(&o.ProbeResultChangeEvents, "probe-result-change-events", false, "emit a Normal ProbeResultChanged event on a container each time one of its probes' results flips (Success to Failure or back), aggregated like probed's other events")
}

func (o *options) validate() error {
	var errs []error
	if o.NodeName == "" {
		errs = append(errs, errors.New("--node-name is required (or set NODE_NAME from the downward API)"))
	}
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
	if len(o.tokenAudiences()) == 0 && !o.MetricsInsecure {
		errs = append(errs, errors.New("--endpoint-token-audiences: at least one audience"))
	}
	if o.HealthAddr != "" {
		if err := endpoints.CheckHealthAddr(o.HealthAddr); err != nil {
			errs = append(errs, fmt.Errorf("--health-bind-address=%w", err))
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
	if o.MaxConcurrentExecsPerPod < 1 {
		errs = append(errs, fmt.Errorf("--max-concurrent-execs-per-pod=%d: must be at least 1", o.MaxConcurrentExecsPerPod))
	}
	if o.ExecSlotMaxHold < 0 {
		errs = append(errs, fmt.Errorf("--exec-slot-max-hold=%v: must be 0 (no limit) or positive", o.ExecSlotMaxHold))
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
	if o.AuthReviewQPS <= 0 || o.AuthReviewBurst < 1 {
		errs = append(errs, errors.New("--auth-review-qps and --auth-review-burst must be positive"))
	}
	return errors.Join(errs...)
}

// tokenAudiences is --endpoint-token-audiences as a list.
func (o *options) tokenAudiences() []string {
	var out []string
	for _, a := range strings.Split(o.EndpointTokenAudiences, ",") {
		if a = strings.TrimSpace(a); a != "" {
			out = append(out, a)
		}
	}
	return out
}
