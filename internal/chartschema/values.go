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
	Image             Image                          `json:"image"`
	ImagePullSecrets  []corev1.LocalObjectReference  `json:"imagePullSecrets"`
	Flags             struct{}                       `json:"flags"` // from probed's flag set
	ExtraArgs         []string                       `json:"extraArgs"`
	RuntimeSocketDir  string                         `json:"runtimeSocketDir" schema:"pattern=^(/.*)?$"`
	Resources         corev1.ResourceRequirements    `json:"resources"`
	NodeSelector      map[string]string              `json:"nodeSelector"`
	Tolerations       []corev1.Toleration            `json:"tolerations"`
	Affinity          corev1.Affinity                `json:"affinity"`
	PriorityClassName string                         `json:"priorityClassName"`
	HostPID           bool                           `json:"hostPID"`
	UpdateStrategy    appsv1.DaemonSetUpdateStrategy `json:"updateStrategy"`
	TerminationGrace  int64                          `json:"terminationGracePeriodSeconds" schema:"minimum=0"`
	PodAnnotations    map[string]string              `json:"podAnnotations"`
	PodLabels         map[string]string              `json:"podLabels"`
	ExtraEnv          []corev1.EnvVar                `json:"extraEnv"`
	ExtraVolumes      []corev1.Volume                `json:"extraVolumes"`
	ExtraVolumeMounts []corev1.VolumeMount           `json:"extraVolumeMounts"`
	Webhook           Webhook                        `json:"webhook"`
	Monitoring        Monitoring                     `json:"monitoring"`
}

// Image is probed's image; its repository and tag are the webhook's too,
// unless webhook.image says otherwise.
type Image struct {
	Repository string `json:"repository" schema:"minLength=1"`
	Tag        string `json:"tag"`
	PullPolicy string `json:"pullPolicy" schema:"enum=Always|IfNotPresent|Never"`
}

// Webhook is the adoption webhook's values.
type Webhook struct {
	Enabled bool `json:"enabled"`
	Image   struct {
		// Repository empty: image.repository with "-webhook" appended.
		Repository string `json:"repository"`
		// Tag empty: image.tag (and so the chart's appVersion).
		Tag        string `json:"tag"`
		PullPolicy string `json:"pullPolicy" schema:"enum=Always|IfNotPresent|Never"`
	} `json:"image"`
	Replicas int32    `json:"replicas" schema:"minimum=1"`
	V        struct{} `json:"v"` // from the webhook's -v flag
	// APIServerFeatureGates is --api-server-feature-gates, as a map.
	APIServerFeatureGates struct {
		H2CContainerProbe     bool `json:"H2CContainerProbe"`
		GRPCContainerProbeTLS bool `json:"GRPCContainerProbeTLS"`
	} `json:"apiServerFeatureGates"`
	ExtraArgs    []string                    `json:"extraArgs"`
	Resources    corev1.ResourceRequirements `json:"resources"`
	NodeSelector map[string]string           `json:"nodeSelector"`
	Tolerations  []corev1.Toleration         `json:"tolerations"`
	CertManager  struct {
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
	Enabled   bool              `json:"enabled"`
	Interval  string            `json:"interval" schema:"pattern=^([0-9]+(ms|s|m|h))+$"`
	Labels    map[string]string `json:"labels"`
	Dashboard struct {
		Enabled bool              `json:"enabled"`
		Labels  map[string]string `json:"labels"`
	} `json:"dashboard"`
}
