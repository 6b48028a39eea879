{{/* probed's own objects' name: DaemonSet, ServiceAccount, RBAC, policies. */}}
{{- define "probed.fullname" -}}
{{- .Values.fullnameOverride | default "probed" | trunc 50 | trimSuffix "-" -}}
{{- end -}}

{{- define "probed.namespace" -}}
{{- .Values.namespace.name | default .Release.Namespace -}}
{{- end -}}

{{/* Helm's labels; test/integration/chart_test.go ignores exactly these when comparing with deploy/. */}}
{{- define "probed.helmLabels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Values.image.tag | default .Chart.AppVersion | quote }}
{{- end -}}

{{- define "probed.labels" -}}
app.kubernetes.io/name: probed
{{ include "probed.helmLabels" . }}
{{- end -}}

{{- define "probed.webhookLabels" -}}
app.kubernetes.io/name: probed-webhook
{{ include "probed.helmLabels" . }}
{{- end -}}

{{- define "probed.image" -}}
{{- printf "%s:%s" .Values.image.repository (.Values.image.tag | default .Chart.AppVersion) -}}
{{- end -}}

{{/* The webhook's image: image.repository and image.tag, unless webhook.image sets its own. */}}
{{- define "probed.webhookImage" -}}
{{- $repo := .Values.webhook.image.repository | default (printf "%s-webhook" .Values.image.repository) -}}
{{- printf "%s:%s" $repo (.Values.webhook.image.tag | default .Values.image.tag | default .Chart.AppVersion) -}}
{{- end -}}

{{/*
probed needs a privileged namespace (hostNetwork, hostPID, a hostPath). With
access to the cluster (helm install/upgrade, not helm template), refuse a
namespace this chart does not create that lacks the Pod Security label, or
that does not exist yet: helm --create-namespace makes it after rendering,
without labels.
*/}}
{{- define "probed.checkPodSecurity" -}}
{{- $ns := include "probed.namespace" . -}}
{{- $key := "pod-security.kubernetes.io/enforce" -}}
{{- if and .Values.namespace.requirePodSecurityLabel (not .Values.namespace.create) -}}
{{- $online := lookup "v1" "Namespace" "" "kube-system" -}}
{{- if $online -}}
{{- $obj := lookup "v1" "Namespace" "" $ns -}}
{{- $fix := printf "create and label it first: kubectl create namespace %s; kubectl label namespace %s %s=privileged (or set namespace.requirePodSecurityLabel=false if your cluster's default Pod Security level is privileged)" $ns $ns $key -}}
{{- if not $obj -}}
{{- fail (printf "namespace %s does not exist: helm --create-namespace would create it without the %s=privileged label probed's pods need, and they would be refused; %s" $ns $key $fix) -}}
{{- end -}}
{{- $level := (($obj.metadata).labels | default dict | dig $key "") -}}
{{- if ne $level "privileged" -}}
{{- fail (printf "namespace %s has %s=%q, not privileged: probed's pods (host network and PID, a hostPath) would be refused; label it: kubectl label --overwrite namespace %s %s=privileged (or set namespace.requirePodSecurityLabel=false if your cluster's default Pod Security level is privileged)" $ns $key $level $ns $key) -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{/* The port of flags.metrics-bind-address. */}}
{{- define "probed.metricsPort" -}}
{{- $addr := index .Values.flags "metrics-bind-address" | default ":9809" | toString -}}
{{- regexReplaceAll "^.*:" $addr "" -}}
{{- end -}}

{{/*
Where the kubelet probes probed: the loopback health listener of
flags.health-bind-address, or else the metrics port over TLS.
*/}}
{{- define "probed.probeTarget" -}}
{{- $h := index .Values.flags "health-bind-address" | default "" | toString -}}
{{- if $h -}}
host: {{ regexReplaceAll ":[0-9]+$" $h "" | trimPrefix "[" | trimSuffix "]" }}
port: {{ regexReplaceAll "^.*:" $h "" }}
scheme: HTTP
{{- else -}}
port: {{ include "probed.metricsPort" . }}
scheme: HTTPS
{{- end -}}
{{- end -}}

{{/* The runtime socket's directory on the host. */}}
{{- define "probed.runtimeSocketDir" -}}
{{- if .Values.runtimeSocketDir -}}
{{- .Values.runtimeSocketDir -}}
{{- else -}}
{{- index .Values.flags "runtime-endpoint" | default "unix:///run/containerd/containerd.sock" | trimPrefix "unix://" | dir -}}
{{- end -}}
{{- end -}}

{{/* A flag's value as probed parses it: whole numbers without an exponent. */}}
{{- define "probed.flagValue" -}}
{{- if and (kindIs "float64" .) (eq (float64 (int64 .)) .) -}}
{{- int64 . -}}
{{- else -}}
{{- toString . -}}
{{- end -}}
{{- end -}}

{{/*
probed's arguments: the flags set in .Values.flags, the runtime endpoint,
bind address and verbosity first (as deploy/daemonset.yaml has them), the
rest by name; then extraArgs.
*/}}
{{- define "probed.args" -}}
{{- $flags := deepCopy .Values.flags -}}
{{- /* The probe-reach policy this chart installs, where its name is not probed's default. */ -}}
{{- $reachPolicy := printf "%s-probe-reach" (include "probed.fullname" .) -}}
{{- if and (kindIs "invalid" (index $flags "probe-reach-policy")) (ne $reachPolicy "probed-probe-reach") -}}
{{- $_ := set $flags "probe-reach-policy" $reachPolicy -}}
{{- end -}}
{{- $first := list "runtime-endpoint" "metrics-bind-address" "v" -}}
{{- $names := $first -}}
{{- range $name := keys $flags | sortAlpha -}}
{{- if not (has $name $first) -}}
{{- $names = append $names $name -}}
{{- end -}}
{{- end -}}
{{- range $name := $names -}}
{{- $v := index $flags $name -}}
{{- if not (kindIs "invalid" $v) }}
- {{ printf "%s%s=%s" (ternary "-" "--" (eq $name "v")) $name (include "probed.flagValue" $v) | quote }}
{{- end -}}
{{- end -}}
{{- range .Values.extraArgs }}
- {{ . | quote }}
{{- end -}}
{{- end -}}

{{/*
A map of feature gates as a --feature-gates flag takes them: Name=bool,...
in name order.
*/}}
{{- define "probed.featureGates" -}}
{{- $gates := list -}}
{{- range $name := keys . | sortAlpha -}}
{{- $gates = append $gates (printf "%s=%t" $name (index $ $name)) -}}
{{- end -}}
{{- join "," $gates -}}
{{- end -}}
