{{/* probed's own objects' name: DaemonSet, ServiceAccount, RBAC, policies. */}}
{{- define "probed.fullname" -}}
{{- .Values.fullnameOverride | default .Values.nameOverride | default "probed" | trunc 50 | trimSuffix "-" -}}
{{- end -}}

{{/* The webhook's objects' name; its flags default to probed-webhook. */}}
{{- define "probed.webhookFullname" -}}
{{- printf "%s-webhook" (include "probed.fullname" .) -}}
{{- end -}}

{{- define "probed.serviceAccountName" -}}
{{- .Values.serviceAccount.name | default (include "probed.fullname" .) -}}
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

{{/* The webhook's pods of this release (Service, PDB, spreading). */}}
{{- define "probed.webhookSelector" -}}
app.kubernetes.io/name: probed-webhook
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{/* Pod template labels: the selector's, the release and the part. */}}
{{- define "probed.podLabels" -}}
app.kubernetes.io/name: {{ .name }}
app.kubernetes.io/instance: {{ .root.Release.Name }}
app.kubernetes.io/component: {{ .component }}
{{- end -}}

{{/*
An image reference from a dict: registry, repository, tag, digest (the
values), what (for the message) and root. [registry/]repository, then
@digest, or :tag (the chart's appVersion when empty). global.imageRegistry
wins over registry. A tag left to an appVersion of "dev" fails: no registry
serves it, and the webhook, which fails open, would then adopt nothing
without a word.
*/}}
{{- define "probed.imageRef" -}}
{{- $root := .root -}}
{{- $registry := ($root.Values.global | default dict).imageRegistry | default .registry -}}
{{- $repo := .repository -}}
{{- if $registry -}}
{{- $repo = printf "%s/%s" (trimSuffix "/" $registry) $repo -}}
{{- end -}}
{{- if .digest -}}
{{- printf "%s@%s" $repo .digest -}}
{{- else -}}
{{- $tag := .tag | default $root.Chart.AppVersion | toString -}}
{{- if and (not .tag) (eq $tag "dev") -}}
{{- fail (printf "%s: no image tag set, and the chart's appVersion is \"dev\", an image no registry serves. Build and push the images (make image TAG=<tag>; make push REGISTRY=<registry> TAG=<tag>; docs/install.md), then set image.registry and image.tag (or image.digest). Set image.tag=dev only where probed:dev is imported on every node." .what) -}}
{{- end -}}
{{- printf "%s:%s" $repo $tag -}}
{{- end -}}
{{- end -}}

{{- define "probed.image" -}}
{{- include "probed.imageRef" (dict "root" . "what" "image" "registry" .Values.image.registry "repository" .Values.image.repository
  "tag" .Values.image.tag "digest" .Values.image.digest) -}}
{{- end -}}

{{/* The webhook's image: image's registry, repository (with "-webhook") and tag, unless webhook.image sets its own. */}}
{{- define "probed.webhookImage" -}}
{{- $w := .Values.webhook.image -}}
{{- include "probed.imageRef" (dict "root" . "what" "webhook.image" "registry" ($w.registry | default .Values.image.registry)
  "repository" ($w.repository | default (printf "%s-webhook" .Values.image.repository))
  "tag" ($w.tag | default .Values.image.tag) "digest" $w.digest) -}}
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

{{/* The port of a --metrics-bind-address. */}}
{{- define "probed.portOf" -}}
{{- regexReplaceAll "^.*:" (toString .) "" -}}
{{- end -}}

{{/*
Where the kubelet probes probed: the loopback health listener of
flags.health-bind-address, or else the metrics port over TLS.
*/}}
{{- define "probed.probeTarget" -}}
{{- $h := index .flags "health-bind-address" | default "" | toString -}}
{{- if $h -}}
host: {{ regexReplaceAll ":[0-9]+$" $h "" | trimPrefix "[" | trimSuffix "]" }}
port: {{ regexReplaceAll "^.*:" $h "" }}
scheme: HTTP
{{- else -}}
port: {{ .port }}
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
probed's flags, from a dict: root, and overrides (flags over
.Values.flags, the shadow's). The probe-reach policy this chart installs is
added where its name is not probed's default.
*/}}
{{- define "probed.flags" -}}
{{- $root := .root -}}
{{- $flags := merge (deepCopy (.overrides | default dict)) (deepCopy $root.Values.flags) -}}
{{- $reachPolicy := printf "%s-probe-reach" (include "probed.fullname" $root) -}}
{{- if and (kindIs "invalid" (index $flags "probe-reach-policy")) (ne $reachPolicy "probed-probe-reach") -}}
{{- $_ := set $flags "probe-reach-policy" $reachPolicy -}}
{{- end -}}
{{- toJson $flags -}}
{{- end -}}

{{/*
probed's arguments from a dict: flags (probed.flags') and extraArgs. The
runtime endpoint, bind address and verbosity first (as
deploy/daemonset.yaml has them), the rest by name; then extraArgs.
*/}}
{{- define "probed.args" -}}
{{- $flags := .flags -}}
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
{{- range .extraArgs }}
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
