#!/usr/bin/env bash
# make demo-down: stop the cluster `make demo` left running (by the PIDs in
# its run dir), undo its changes to the machine (pod bridge, sysctls,
# cgroups, mounts) and remove the run dir.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"
export PATH="/usr/local/go/bin:$PATH"
run_dir=${DEMO_RUN_DIR:-$root/.cache/demo}
prom_dir=$root/.cache/demo-prometheus
if [[ -f $prom_dir/prometheus.pid ]]; then
  pid=$(cat "$prom_dir/prometheus.pid")
  # Only our Prometheus: the PID must still run /usr/bin/prometheus.
  if [[ "$(tr '\0' ' ' </proc/"$pid"/cmdline 2>/dev/null)" == /usr/bin/prometheus* ]]; then
    kill "$pid" && echo "demo-down: stopped Prometheus (pid $pid)"
  fi
fi
rm -rf "$prom_dir"
if [[ ! -e $run_dir ]]; then
  echo "demo-down: nothing to stop ($run_dir does not exist)"
  exit 0
fi
[[ $EUID -eq 0 ]] || { echo "demo-down: run as root" >&2; exit 1; }
if [[ ! -x .cache/bin/demo-node ]]; then
  echo "demo-down: building demo-node..."
  mkdir -p .cache/bin
  go build -o .cache/bin/demo-node ./test/harness/node/cmd/demo-node
fi
.cache/bin/demo-node down --run-dir "$run_dir"
