// Package chartschema generates charts/probed/values.schema.json: the shape
// of every value the chart reads, from Go types, with probed's flags typed
// from the daemon's own flag set and the embedded Kubernetes objects
// (resources, tolerations, affinity, volumes, ...) from k8s.io/api. Every
// object, at every level, refuses keys it does not have, so that a typo
// (resource.limits, webhook.replica) fails `helm install` and `helm
// upgrade` instead of being ignored.
//
// Regenerate after changing a flag or a value (cmd/probed's test compares):
//
//	go test ./cmd/probed/ -run TestChartValuesSchema -update
package chartschema

import (
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
)

// Values is charts/probed/values.yaml, key for key. `schema` tags add
// constraints (see constrain).
type Values struct {
	// Global is what Helm passes every chart and subchart; a parent chart's
	// globals are not this chart's to refuse (see Generate).
	Global           Global `json:"global"`
	NameOverride     string `json:"nameOverride" schema:"pattern=^([a-z0-9]([-a-z0-9]*[a-z0-9])?)?$"`
	FullnameOverride string `json:"fullnameOverride" schema:"pattern=^([a-z0-9]([-a-z0-9]*[a-z0-9])?)?$"`
	Namespace        struct {
		Name   string            `json:"name" schema:"pattern=^([a-z0-9]([-a-z0-9]*[a-z0-9])?)?$"`
		Create bool              `json:"create"`
		Labels map[string]string `json:"labels"`
		// RequirePodSecurityLabel: refuse to install into an existing
		// namespace without the privileged Pod Security label, or into one
		// that helm's --create-namespace would create without it.
		RequirePodSecurityLabel bool `json:"requirePodSecurityLabel"`
	} `json:"namespace"`
	Image              Image                          `json:"image"`
	ImagePullSecrets   []corev1.LocalObjectReference  `json:"imagePullSecrets"`
	ServiceAccount     ServiceAccount                 `json:"serviceAccount"`
	Flags              struct{}                       `json:"flags"` // from probed's flag set
	ExtraArgs          []string                       `json:"extraArgs"`
	RuntimeSocketDir   string                         `json:"runtimeSocketDir" schema:"pattern=^(/.*)?$"`
	Resources          corev1.ResourceRequirements    `json:"resources"`
	NodeSelector       map[string]string              `json:"nodeSelector"`
	Tolerations        []corev1.Toleration            `json:"tolerations"`
	Affinity           corev1.Affinity                `json:"affinity"`
	PriorityClassName  string                         `json:"priorityClassName"`
	HostPID            bool                           `json:"hostPID"`
	UpdateStrategy     appsv1.DaemonSetUpdateStrategy `json:"updateStrategy"`
	TerminationGrace   int64                          `json:"terminationGracePeriodSeconds" schema:"minimum=0"`
	PodAnnotations     map[string]string              `json:"podAnnotations"`
	PodLabels          map[string]string              `json:"podLabels"`
	PodSecurityContext corev1.PodSecurityContext      `json:"podSecurityContext"`
	SecurityContext    corev1.SecurityContext         `json:"securityContext"`
	ExtraEnv           []corev1.EnvVar                `json:"extraEnv"`
	ExtraVolumes       []corev1.Volume                `json:"extraVolumes"`
	ExtraVolumeMounts  []corev1.VolumeMount           `json:"extraVolumeMounts"`
	ProbeTLS           ProbeTLS                       `json:"probeTLS"`
	PodSource          PodSource                      `json:"podSource"`
	Shadow             Shadow                         `json:"shadow"`
	Webhook            Webhook                        `json:"webhook"`
	Monitoring         Monitoring                     `json:"monitoring"`
}

// Global holds the globals this chart reads.
type Global struct {
	// ImageRegistry, when set, is both images' registry, over
	// image.registry and webhook.image.registry.
	ImageRegistry string `json:"imageRegistry"`
}

// Image is probed's image; its registry, repository and tag are the
// webhook's too, unless webhook.image says otherwise.
type Image struct {
	// Registry is prepended to the repository: host[:port][/path].
	Registry   string `json:"registry" schema:"pattern=^([^/@:]+(:[0-9]+)?(/[^@:]+)*)?$"`
	Repository string `json:"repository" schema:"minLength=1"`
	Tag        string `json:"tag" schema:"pattern=^([A-Za-z0-9_][A-Za-z0-9_.-]{0,127})?$"`
	// Digest, when set, pins the image; the tag is then left out.
	Digest     string `json:"digest" schema:"pattern=^([a-z0-9]+([+._-][a-z0-9]+)*:[a-zA-Z0-9=_-]+)?$"`
	PullPolicy string `json:"pullPolicy" schema:"enum=Always|IfNotPresent|Never"`
}

// ServiceAccount is probed's service account.
type ServiceAccount struct {
	// Create false: the account exists already (by Name); the chart still
	// binds probed's ClusterRole to it.
	Create bool `json:"create"`
	// Name empty: the full name (probed).
	Name        string            `json:"name" schema:"pattern=^([a-z0-9]([-a-z0-9.]*[a-z0-9])?)?$"`
	Annotations map[string]string `json:"annotations"`
}

// ProbeTLS is what probes' probed.io/tls field needs of the node, as
// deploy/probe-tls has it.
type ProbeTLS struct {
	// PodVolumes mounts KubeletPodsDir (read-only, HostToContainer) and
	// passes it as --pod-volumes-dir: probes then read a CA and a client
	// certificate from their pod's own volumes. It lets probed read every
	// pod's Secret, ConfigMap and projected volumes on its node.
	PodVolumes bool `json:"podVolumes"`
	// KubeletPodsDir is the kubelet's --root-dir/pods on the host, mounted
	// at the same path.
	KubeletPodsDir string `json:"kubeletPodsDir" schema:"pattern=^/.+$"`
}

// PodSource is where probed reads its node's pods, as
// deploy/pod-source-kubelet has it for kubelet.
type PodSource struct {
	// Mode apiserver watches the API server; kubelet reads the kubelet's
	// Pods API and drops the ClusterRole's read of pods; auto mounts the
	// socket, keeps the read, and lets probed choose at start.
	Mode string `json:"mode" schema:"enum=apiserver|auto|kubelet"`
	// KubeletPodsAPIDir is <kubelet --root-dir>/pods-api on the host,
	// mounted read-only at the same path.
	KubeletPodsAPIDir string `json:"kubeletPodsAPIDir" schema:"pattern=^/.+$"`
}

// Shadow is a second DaemonSet of probed in shadow mode
// (docs/migration.md): --probe-source=spec --dry-run, beside the kubelet.
type Shadow struct {
	Enabled bool `json:"enabled"`
	// MetricsPort is its --metrics-bind-address port; both use the host's
	// network.
	MetricsPort int32 `json:"metricsPort" schema:"minimum=1;maximum=65535"`
	// HealthPort is its --health-bind-address port, where
	// flags.health-bind-address is set.
	HealthPort int32 `json:"healthPort" schema:"minimum=1;maximum=65535"`
	// NodeSelector empty: probed's own nodeSelector.
	NodeSelector map[string]string `json:"nodeSelector"`
	// ExtraArgs are added after probed's flags and the two of shadow mode.
	ExtraArgs []string `json:"extraArgs"`
}

// Webhook is the adoption webhook's values.
type Webhook struct {
	Enabled bool `json:"enabled"`
	Image   struct {
		// Registry empty: image.registry (global.imageRegistry wins over both).
		Registry string `json:"registry" schema:"pattern=^([^/@:]+(:[0-9]+)?(/[^@:]+)*)?$"`
		// Repository empty: image.repository with "-webhook" appended.
		Repository string `json:"repository"`
		// Tag empty: image.tag (and so the chart's appVersion).
		Tag string `json:"tag" schema:"pattern=^([A-Za-z0-9_][A-Za-z0-9_.-]{0,127})?$"`
		// Digest pins the webhook's image (image.digest is probed's only).
		Digest     string `json:"digest" schema:"pattern=^([a-z0-9]+([+._-][a-z0-9]+)*:[a-zA-Z0-9=_-]+)?$"`
		PullPolicy string `json:"pullPolicy" schema:"enum=Always|IfNotPresent|Never"`
	} `json:"image"`
	Replicas int32    `json:"replicas" schema:"minimum=1"`
	V        struct{} `json:"v"` // from the webhook's -v flag
	// APIServerFeatureGates is --api-server-feature-gates, as a map.
	APIServerFeatureGates struct {
		H2CContainerProbe     bool `json:"H2CContainerProbe"`
		GRPCContainerProbeTLS bool `json:"GRPCContainerProbeTLS"`
	} `json:"apiServerFeatureGates"`
	ExtraArgs                 []string                          `json:"extraArgs"`
	Resources                 corev1.ResourceRequirements       `json:"resources"`
	NodeSelector              map[string]string                 `json:"nodeSelector"`
	Tolerations               []corev1.Toleration               `json:"tolerations"`
	Affinity                  corev1.Affinity                   `json:"affinity"`
	TopologySpreadConstraints []corev1.TopologySpreadConstraint `json:"topologySpreadConstraints"`
	PriorityClassName         string                            `json:"priorityClassName"`
	PodAnnotations            map[string]string                 `json:"podAnnotations"`
	PodLabels                 map[string]string                 `json:"podLabels"`
	CertManager               struct {
		Enabled bool `json:"enabled"`
		// IssuerRef empty: a self-signed root and a CA of the chart's own,
		// as deploy/webhook/cert-manager has them.
		IssuerRef struct {
			Name  string `json:"name"`
			Kind  string `json:"kind" schema:"enum=Issuer|ClusterIssuer"`
			Group string `json:"group"`
		} `json:"issuerRef"`
	} `json:"certManager"`
}

// Monitoring is the Prometheus Operator objects' values.
type Monitoring struct {
	Enabled  bool   `json:"enabled"`
	Interval string `json:"interval" schema:"pattern=^([0-9]+(ms|s|m|h))+$"`
	// ScrapeTimeout empty: Prometheus' own (10s, at most the interval).
	ScrapeTimeout string            `json:"scrapeTimeout" schema:"pattern=^(([0-9]+(ms|s|m|h))+)?$"`
	Labels        map[string]string `json:"labels"`
	// Relabelings and MetricRelabelings are added to the PodMonitors'
	// endpoints, after the chart's own.
	Relabelings       []RelabelConfig `json:"relabelings"`
	MetricRelabelings []RelabelConfig `json:"metricRelabelings"`
	PodMonitor        struct {
		Enabled bool `json:"enabled"`
	} `json:"podMonitor"`
	Rules struct {
		Enabled bool `json:"enabled"`
	} `json:"rules"`
	// RunbookBaseURL is the page the alerts' runbook_url point into
	// ("#<alert>" follows); empty: files/prometheusrule.yaml's, the docs of
	// the chart's release.
	RunbookBaseURL string `json:"runbookBaseURL" schema:"pattern=^(https?://[^# ]+)?$"`
	Dashboard      struct {
		Enabled bool `json:"enabled"`
		// Namespace empty: probed's.
		Namespace string            `json:"namespace" schema:"pattern=^([a-z0-9]([-a-z0-9]*[a-z0-9])?)?$"`
		Labels    map[string]string `json:"labels"`
	} `json:"dashboard"`
}

// RelabelConfig is the Prometheus Operator's RelabelConfig
// (monitoring.coreos.com/v1), field for field.
type RelabelConfig struct {
	SourceLabels []string `json:"sourceLabels"`
	Separator    string   `json:"separator"`
	TargetLabel  string   `json:"targetLabel"`
	Regex        string   `json:"regex"`
	Modulus      uint64   `json:"modulus"`
	Replacement  string   `json:"replacement"`
	Action       string   `json:"action" schema:"enum=replace|Replace|keep|Keep|drop|Drop|hashmod|HashMod|labelmap|LabelMap|labeldrop|LabelDrop|labelkeep|LabelKeep|lowercase|Lowercase|uppercase|Uppercase|keepequal|KeepEqual|dropequal|DropEqual"`
}
