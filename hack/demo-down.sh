#!/usr/bin/env bash
# make demo-down: stop the cluster `make demo` left running (by the PIDs in
# its run dir), undo its changes to the machine (pod bridge, sysctls,
# cgroups, mounts) and remove the run dir.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"
export PATH="/usr/local/go/bin:$PATH"
run_dir=${DEMO_RUN_DIR:-$root/.cache/demo}
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
