#!/usr/bin/env bash
# make demo: from a fresh Debian machine (as root), build everything, start a
# real single-node cluster on loopback (etcd, kube-apiserver,
# kube-controller-manager, kube-scheduler, containerd, kubelet), deploy probed
# from deploy/ and the sample workloads, and show for about a minute and a
# half what probed does to them. The cluster keeps running afterwards; stop it
# with `make demo-down`.
#
# Environment: DEMO_RUN_DIR (default .cache/demo), DEMO_SECONDS (how long to
# watch, default 80), DEMO_FRAME_SECONDS (between views, default 15),
# DEMO_METRICS_PORT (probed's, default 9809), DEMO_PROBED_ARGS (extra probed
# flags, space-separated).
#
# Sample workloads: every manifest in examples/demo/ (kubectl apply -f). Their
# images come from hack/build-workload-images.sh (and
# examples/demo/build-images.sh, given the image dir as $1, if it exists),
# which write docker archives (*.tar) into .cache/images; the node imports
# every *.tar there. Without examples/demo, a small built-in set is used.
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"
export PATH="/usr/local/go/bin:$PATH"
run_dir=${DEMO_RUN_DIR:-$root/.cache/demo}
image_dir=${PROBED_IMAGE_DIR:-$root/.cache/images}
watch_for=${DEMO_SECONDS:-80}
frame=${DEMO_FRAME_SECONDS:-15}
metrics_port=${DEMO_METRICS_PORT:-9809}
t0=$SECONDS

if [[ -t 1 ]]; then bold=$'\e[1m' dim=$'\e[2m' off=$'\e[0m'; else bold='' dim='' off=''; fi
step() { printf '\n%s==> [%4ss] %s%s\n' "$bold" "$((SECONDS - t0))" "$*" "$off"; }
die() { echo "demo: $*" >&2; exit 1; }

[[ $EUID -eq 0 ]] || die "run as root (the kubelet, containerd and the CNI bridge need it)"
command -v go >/dev/null || die "Go is not installed (expected in /usr/local/go/bin)"
trap 'rc=$?; ((rc == 0)) || echo "demo: failed (exit $rc); logs are in $run_dir if it got that far; clean up with: make demo-down" >&2' EXIT

step "Debian packages (hack/install-deps.sh)"
bash hack/install-deps.sh
step "Kubernetes v1.37 binaries (hack/build-k8s.sh; from an empty Go cache about 5-10 min on 2 cores)"
bash hack/build-k8s.sh
step "containerd 2 (hack/build-containerd.sh; from an empty Go cache about 1-3 min)"
bash hack/build-containerd.sh
step "kubectl (hack/build-kubectl.sh; built from k8s.io/kubectl when not installed, about 2 min)"
kubectl_dir=$(bash hack/build-kubectl.sh)
export PATH="$kubectl_dir:$PATH"
step "test images: busybox, pause (hack/build-images.sh)"
bash hack/build-images.sh
step "probed's image (hack/build-probed-image.sh)"
bash hack/build-probed-image.sh
if [[ -f hack/build-workload-images.sh ]]; then
  step "sample workloads' images (hack/build-workload-images.sh)"
  bash hack/build-workload-images.sh
fi
if [[ -f examples/demo/build-images.sh ]]; then
  step "sample workloads' images (examples/demo/build-images.sh)"
  bash examples/demo/build-images.sh "$image_dir"
fi
step "demo-node (test/harness/node/cmd/demo-node)"
mkdir -p .cache/bin
go build -o .cache/bin/demo-node ./test/harness/node/cmd/demo-node
echo "built .cache/bin/demo-node"

if [[ -e $run_dir ]]; then
  step "stopping the previous demo in $run_dir"
  .cache/bin/demo-node down --run-dir "$run_dir"
fi
step "starting the node, importing the images, deploying probed from deploy/"
probed_args=()
for a in ${DEMO_PROBED_ARGS:-}; do probed_args+=("--probed-arg=$a"); done
up_out=$(mktemp)
.cache/bin/demo-node up --run-dir "$run_dir" --image-dir "$image_dir" --metrics-port "$metrics_port" \
  "${probed_args[@]}" | tee "$up_out"
KUBECONFIG=$(sed -n 's/^KUBECONFIG=//p' "$up_out")
url=$(sed -n 's/^PROBED_URL=//p' "$up_out")
# probed serves /metrics and /debug/probes over TLS (a self-signed
# certificate) to tokens the API server lets read them; demo-node wrote one.
token_file=$(sed -n 's/^PROBED_TOKEN_FILE=//p' "$up_out")
rm -f "$up_out"
export KUBECONFIG
setup_done=$SECONDS

# The same Prometheus the integration tier tests with (Debian's), scraping
# probed the way a cluster's would; it outlives this script until demo-down.
step "Prometheus (Debian's prometheus) scraping probed every 5s"
prom_dir=$root/.cache/demo-prometheus
prom_port=${DEMO_PROMETHEUS_PORT:-9090}
if (exec 3<>/dev/tcp/127.0.0.1/$prom_port) 2>/dev/null; then prom_port=19090; fi
if [[ -f $prom_dir/prometheus.pid ]]; then kill "$(cat "$prom_dir/prometheus.pid")" 2>/dev/null || true; fi
rm -rf "$prom_dir" && mkdir -p "$prom_dir/data"
cat >"$prom_dir/prometheus.yml" <<PROM
global: {scrape_interval: 5s, evaluation_interval: 5s}
rule_files: [$root/deploy/monitoring/rules/probed.rules.yaml]
scrape_configs:
- job_name: probed
  scheme: https
  tls_config: {insecure_skip_verify: true}
  authorization: {type: Bearer, credentials_file: '$token_file'}
  static_configs: [{targets: ['${url#https://}'], labels: {node: '127.0.0.1'}}]
PROM
setsid /usr/bin/prometheus --config.file="$prom_dir/prometheus.yml" --storage.tsdb.path="$prom_dir/data" \
  --web.listen-address="127.0.0.1:$prom_port" >"$prom_dir/prometheus.log" 2>&1 </dev/null &
echo $! >"$prom_dir/prometheus.pid"
prom_url=http://127.0.0.1:$prom_port
echo "Prometheus at $prom_url (pid $(cat "$prom_dir/prometheus.pid"), log $prom_dir/prometheus.log)"

step "sample workloads"
if [[ -d examples/demo ]] && compgen -G 'examples/demo/*.y*ml' >/dev/null; then
  kubectl apply -f examples/demo/
else
  echo "${dim}(no examples/demo/: using the built-in samples)${off}"
  kubectl apply -f - <<'YAML'
# Readiness that flips: httpd serves /ready for 20 s, then not for 20 s, ...
apiVersion: v1
kind: Pod
metadata:
  name: flipping-readiness
  labels: {app: demo}
  annotations:
    probed.io/probes: |
      {"web": {"readinessProbe": {"httpGet": {"path": "/ready", "port": "http"}, "periodSeconds": 2, "failureThreshold": 1}}}
spec:
  readinessGates: [{conditionType: probed.io/ready}]
  terminationGracePeriodSeconds: 1
  containers:
  - name: web
    image: probed.local/busybox:latest
    imagePullPolicy: Never
    ports: [{name: http, containerPort: 8080}]
    command: [sh, -c]
    args:
    - |
      mkdir -p /www && httpd -p 8080 -h /www
      while :; do echo ok >/www/ready; sleep 20; rm -f /www/ready; sleep 20; done
---
# Liveness that fails after 25 s: probed stops the container, the kubelet restarts it.
apiVersion: v1
kind: Pod
metadata:
  name: failing-liveness
  labels: {app: demo}
  annotations:
    probed.io/probes: |
      {"app": {"livenessProbe": {"exec": {"command": ["cat", "/tmp/healthy"]}, "periodSeconds": 3, "failureThreshold": 2}}}
spec:
  readinessGates: [{conditionType: probed.io/ready}]
  terminationGracePeriodSeconds: 2
  containers:
  - name: app
    image: probed.local/busybox:latest
    imagePullPolicy: Never
    command: [sh, -c, "touch /tmp/healthy; sleep 25; rm /tmp/healthy; exec sleep 3600"]
---
# A slow starter: ready only after its startup probe passes (about 20 s).
apiVersion: v1
kind: Pod
metadata:
  name: slow-start
  labels: {app: demo}
  annotations:
    probed.io/probes: |
      {"app": {"startupProbe":   {"exec": {"command": ["test", "-f", "/tmp/started"]}, "periodSeconds": 2, "failureThreshold": 30},
               "readinessProbe": {"tcpSocket": {"port": 8080}, "periodSeconds": 5}}}
spec:
  readinessGates: [{conditionType: probed.io/ready}]
  terminationGracePeriodSeconds: 1
  containers:
  - name: app
    image: probed.local/busybox:latest
    imagePullPolicy: Never
    command: [sh, -c, "sleep 20; touch /tmp/started; mkdir -p /www; exec httpd -f -p 8080 -h /www"]
YAML
fi

# curl, or demo-node's own fetch where curl is not installed.
fetch() {
  if command -v curl >/dev/null; then curl -fsS "$1"; else .cache/bin/demo-node fetch "$1"; fi
}
# The same for probed: TLS with its self-signed certificate, and the token.
fetch_probed() {
  if command -v curl >/dev/null; then
    curl -fsSk -H "Authorization: Bearer $(cat "$token_file")" "$1"
  else
    .cache/bin/demo-node fetch "$1" "$token_file"
  fi
}

# One view: the pods with their readiness gates, probed's latest events, and
# its probe counters.
show() {
  printf '\n%s──── %s  (t+%ss) ─────────────────────────────────────────────%s\n' "$bold" "$(date +%T)" "$((SECONDS - setup_done))" "$off"
  echo "${bold}\$ kubectl get pods -A -o wide${off} ${dim}(READINESS GATES: probed.io/ready; READY waits for it)${off}"
  kubectl get pods -A -o wide --field-selector metadata.namespace!=kube-system 2>&1 | cut -c1-200 || true
  echo
  echo "${bold}probed's latest events${off} ${dim}(kubectl get events -A --field-selector source=probed)${off}"
  kubectl get events -A --field-selector source=probed --sort-by=.lastTimestamp \
    -o custom-columns='LAST SEEN:.lastTimestamp,TYPE:.type,REASON:.reason,OBJECT:.involvedObject.name,COUNT:.count,MESSAGE:.message' \
    2>/dev/null | { read -r h && echo "$h" && tail -n 8; } | cut -c1-200 || true
  echo
  echo "${bold}probe results${off} ${dim}(curl -k -H \"Authorization: Bearer \$(cat $token_file)\" $url/metrics | grep prober_probe_total)${off}"
  fetch_probed "$url/metrics" 2>/dev/null | grep '^prober_probe_total' | sed -E 's/,?pod_uid="[^"]*"//; s/^prober_probe_total//' |
    sort | head -n 14 || echo "(no probe results yet)"
}

step "watching for ${watch_for}s: readiness gates flip, a container is restarted, a slow starter comes up"
end=$((SECONDS + watch_for))
while :; do
  show
  ((SECONDS + frame <= end)) || break
  sleep "$frame"
done

# The pod probed restarted most, as `kubectl describe` shows it.
victim=$(kubectl get pods -A --no-headers --field-selector metadata.namespace!=kube-system,metadata.namespace!=probed-system \
  -o custom-columns='NS:.metadata.namespace,NAME:.metadata.name,R:.status.containerStatuses[*].restartCount' 2>/dev/null |
  awk '{n=split($3, r, ","); s=0; for (i=1; i<=n; i++) s+=r[i]; print s, $1, $2}' | sort -n | tail -n 1)
if [[ -n $victim ]]; then
  read -r _ ns pod <<<"$victim"
  printf '\n%s$ kubectl describe pod -n %s %s%s %s(events)%s\n' "$bold" "$ns" "$pod" "$off" "$dim" "$off"
  kubectl describe pod -n "$ns" "$pod" | sed -n '/^Events:/,$p' | cut -c1-200
fi

echo
echo "${bold}probed's own metrics${off} ${dim}(probed_*)${off}"
fetch_probed "$url/metrics" 2>/dev/null | grep -E '^probed_(workers|status_writes_total|runtime_exec_total|container_kills_total)' |
  awk '$2 != 0' | head -n 14 || true

# One PromQL query and its answer, as a dashboard would ask it.
promql='sum by (probe_type, result) (increase(prober_probe_total[1m]))'
encoded='sum%20by%20(probe_type%2C%20result)%20(increase(prober_probe_total%5B1m%5D))'
echo
echo "${bold}Prometheus: probes in the last minute by type and result${off}"
echo "${dim}PromQL: $promql${off}"
fetch "$prom_url/api/v1/query?query=$encoded" 2>/dev/null |
  sed -E 's/\{"metric":\{"probe_type":"([^"]*)","result":"([^"]*)"\},"value":\[[^,]*,"([^"]*)"\]\}/\n  \1 \2: \3\n/g' |
  grep -E '^  (Liveness|Readiness|Startup) ' | sed -E 's/: ([0-9]+)(\.[0-9]+)?$/: \1/' || echo "  (no answer yet; the UI is at $prom_url)"

cat <<MSG

${bold}make demo finished in $((SECONDS - t0))s (setup $((setup_done - t0))s, watching $((SECONDS - setup_done))s). The cluster keeps running.${off}
Look further:
  export KUBECONFIG=$KUBECONFIG
  kubectl get pods -A -o wide -w
  kubectl describe pod -n <namespace> <pod>      # Unhealthy, Killing, ProbeWarning events
  kubectl -n probed-system logs ds/probed
  token=\$(cat $token_file)   # probed-harness-scraper's, bound to deploy/scraper-roles.yaml
  curl -k -H "Authorization: Bearer \$token" $url/debug/probes    # every probe worker: state, last results
  curl -k -H "Authorization: Bearer \$token" "$url/debug/probes?namespace=default"    # one namespace's (or &pod=NAME)
  curl -sk -H "Authorization: Bearer \$token" $url/metrics | grep -E '^(prober|probed)_'
  Prometheus UI: $prom_url   (try: $promql)
  logs: $run_dir/*.log, $run_dir/controlplane/*.log, $run_dir/containerd/containerd.log
Stop everything and remove $run_dir:
  make demo-down
MSG
