{{- /*
probed's DaemonSet, from a dict: root; name; component (daemon, or shadow);
selector (its labels; the main DaemonSet's stays app.kubernetes.io/name
alone, as a selector cannot change on upgrade); overrides (flags over
.Values.flags); extraArgs; nodeSelector. deploy/daemonset.yaml explains each
choice here; keep the two the same.
*/ -}}
{{- define "probed.daemonSet" -}}
{{- $root := .root -}}
{{- $v := $root.Values -}}
{{- /* probeTLS.podVolumes: probed's own DaemonSet only (the shadow runs spec probes, which have no probed.io/tls). */ -}}
{{- $podVolumes := and $v.probeTLS.podVolumes (eq .component "daemon") -}}
{{- $overrides := .overrides | default dict -}}
{{- if $podVolumes -}}
{{- $overrides = merge (dict "pod-volumes-dir" $v.probeTLS.kubeletPodsDir) $overrides -}}
{{- end -}}
{{- $podsAPI := has $v.podSource.mode (list "auto" "kubelet") -}}
{{- /* podSource.mode apiserver passes nothing: --pod-source=auto finds no socket mounted, as deploy/'s DaemonSet. */ -}}
{{- if $podsAPI -}}
{{- $overrides = merge (dict "pod-source" $v.podSource.mode "kubelet-pods-api-socket" (printf "%s/pods-api.sock" $v.podSource.kubeletPodsAPIDir)) $overrides -}}
{{- end -}}
{{- $flags := include "probed.flags" (dict "root" $root "overrides" $overrides) | fromJson -}}
{{- $port := include "probed.portOf" (index $flags "metrics-bind-address" | default ":9809") | int -}}
{{- $sockDir := include "probed.runtimeSocketDir" $root -}}
{{- $runtimeType := index $flags "runtime-type" | default "auto" -}}
apiVersion: apps/v1
kind: DaemonSet
metadata:
  name: {{ .name }}
  namespace: {{ include "probed.namespace" $root }}
  labels:
    {{- include "probed.labels" $root | nindent 4 }}
spec:
  selector:
    matchLabels:
      {{- toYaml .selector | nindent 6 }}
  {{- with $v.updateStrategy }}
  updateStrategy:
    {{- toYaml . | nindent 4 }}
  {{- end }}
  template:
    metadata:
      labels:
        {{- include "probed.podLabels" (dict "root" $root "name" "probed" "component" .component) | nindent 8 }}
        {{- with $v.podLabels }}
        {{- toYaml . | nindent 8 }}
        {{- end }}
      annotations:
        prometheus.io/scrape: "true"
        prometheus.io/scheme: https
        prometheus.io/port: {{ $port | quote }}
        prometheus.io/path: /metrics
        {{- with $v.podAnnotations }}
        {{- toYaml . | nindent 8 }}
        {{- end }}
    spec:
      serviceAccountName: {{ include "probed.serviceAccountName" $root }}
      {{- with $v.priorityClassName }}
      priorityClassName: {{ . }}
      {{- end }}
      hostNetwork: true
      hostPID: {{ $v.hostPID }}
      dnsPolicy: ClusterFirstWithHostNet
      {{- with $v.podSecurityContext }}
      securityContext:
        {{- toYaml . | nindent 8 }}
      {{- end }}
      {{- with $v.imagePullSecrets }}
      imagePullSecrets:
        {{- toYaml . | nindent 8 }}
      {{- end }}
      {{- with .nodeSelector }}
      nodeSelector:
        {{- toYaml . | nindent 8 }}
      {{- end }}
      {{- with $v.affinity }}
      affinity:
        {{- toYaml . | nindent 8 }}
      {{- end }}
      {{- with $v.tolerations }}
      tolerations:
        {{- toYaml . | nindent 8 }}
      {{- end }}
      terminationGracePeriodSeconds: {{ $v.terminationGracePeriodSeconds }}
      containers:
      - name: probed
        image: {{ include "probed.image" $root }}
        imagePullPolicy: {{ $v.image.pullPolicy }}
        args:
        {{- include "probed.args" (dict "flags" $flags "extraArgs" (concat $v.extraArgs (.extraArgs | default list))) | trim | nindent 8 }}
        env:
        - name: NODE_NAME
          valueFrom:
            fieldRef:
              fieldPath: spec.nodeName
        - name: GOMEMLIMIT
          valueFrom:
            resourceFieldRef:
              resource: limits.memory
        - name: GOGC
          value: "50"
        - name: POD_NAME
          valueFrom:
            fieldRef:
              fieldPath: metadata.name
        - name: POD_NAMESPACE
          valueFrom:
            fieldRef:
              fieldPath: metadata.namespace
        - name: POD_UID
          valueFrom:
            fieldRef:
              fieldPath: metadata.uid
        {{- with $v.extraEnv }}
        {{- toYaml . | nindent 8 }}
        {{- end }}
        ports:
        - name: metrics
          containerPort: {{ $port }}
          protocol: TCP
        livenessProbe:
          httpGet:
            path: /healthz
            {{- include "probed.probeTarget" (dict "flags" $flags "port" $port) | nindent 12 }}
          periodSeconds: 10
          failureThreshold: 3
        readinessProbe:
          httpGet:
            path: /readyz
            {{- include "probed.probeTarget" (dict "flags" $flags "port" $port) | nindent 12 }}
          periodSeconds: 5
        {{- with $v.resources }}
        resources:
          {{- toYaml . | nindent 10 }}
        {{- end }}
        {{- with $v.securityContext }}
        securityContext:
          {{- toYaml . | nindent 10 }}
        {{- end }}
        volumeMounts:
        - name: {{ ternary "containerd-run" "runtime-run" (eq $sockDir "/run/containerd") }}
          mountPath: {{ $sockDir }}
        {{- if and (ne $sockDir "/run/containerd") (has $runtimeType (list "auto" "containerd")) }}
        - name: containerd-fifo
          mountPath: /run/containerd/fifo
        {{- end }}
        {{- if $podVolumes }}
        - name: kubelet-pods
          mountPath: {{ $v.probeTLS.kubeletPodsDir }}
          readOnly: true
          mountPropagation: HostToContainer
        {{- end }}
        {{- if $podsAPI }}
        - name: kubelet-pods-api
          mountPath: {{ $v.podSource.kubeletPodsAPIDir }}
          readOnly: true
        {{- end }}
        {{- with $v.extraVolumeMounts }}
        {{- toYaml . | nindent 8 }}
        {{- end }}
      volumes:
      - name: {{ ternary "containerd-run" "runtime-run" (eq $sockDir "/run/containerd") }}
        hostPath:
          path: {{ $sockDir }}
          type: Directory
      {{- if and (ne $sockDir "/run/containerd") (has $runtimeType (list "auto" "containerd")) }}
      # containerd's shim opens exec probes' FIFOs by this path, outside
      # the pod as inside.
      - name: containerd-fifo
        hostPath:
          path: /run/containerd/fifo
          type: DirectoryOrCreate
      {{- end }}
      {{- if $podVolumes }}
      # Read access to every pod's secret, configMap and projected volumes
      # on the node, for probed.io/tls (values.yaml's probeTLS). Those are
      # tmpfs mounts made after probed starts: HostToContainer lets them in.
      - name: kubelet-pods
        hostPath:
          path: {{ $v.probeTLS.kubeletPodsDir }}
          type: Directory
      {{- end }}
      {{- if $podsAPI }}
      # The kubelet's Pods API socket (values.yaml's podSource): the
      # directory, as the kubelet recreates the socket when it restarts.
      - name: kubelet-pods-api
        hostPath:
          path: {{ $v.podSource.kubeletPodsAPIDir }}
          type: DirectoryOrCreate
      {{- end }}
      {{- with $v.extraVolumes }}
      {{- toYaml . | nindent 6 }}
      {{- end }}
{{- end -}}
