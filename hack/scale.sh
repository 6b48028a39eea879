#!/usr/bin/env bash
# make scale: issue 16's cluster-scale run. One real etcd + kube-apiserver,
# SCALE_NODES simulated nodes (default 50) each with its own probed, and
# SCALE_PODS pods per node (default 30; 110 overloads 2 cores, see docs/scale.md), through every phase: steady state,
# readiness transitions, liveness kills, an event storm, a rolling restart of
# every probed and an apiserver restart. Writes .cache/scale/result.json
# (SCALE_OUT); docs/scale.md explains the figures. Before it, TestPDBRestarts:
# --pdb-restarts over 5 nodes' probeds (docs/pdb-restarts.md, about 1 minute;
# not in CI). Then the kubelet-alone comparison on a real node
# (.cache/scale/kubelet.json). About 15 minutes on 2 cores.
set -euo pipefail
cd "$(dirname "$0")/.."
bash hack/install-deps.sh
bash hack/build-k8s.sh
bash hack/build-images.sh
bash hack/build-workload-images.sh
export SCALE_NODES="${SCALE_NODES:-50}" SCALE_PODS="${SCALE_PODS:-30}"
export SCALE_STEADY="${SCALE_STEADY:-70s}" SCALE_STORM="${SCALE_STORM:-60s}"
export SCALE_PHASES="${SCALE_PHASES:-transitions,kills,storm,restart,apiserver}"
# probed's defaults (status resync 1m, inside the 70 s steady window).
export SCALE_PROBED_FLAGS="${SCALE_PROBED_FLAGS-}"
export SCALE_OUT="${SCALE_OUT:-$PWD/.cache/scale/result.json}"
echo "==> scale: $SCALE_NODES nodes × $SCALE_PODS pods, phases $SCALE_PHASES"
go test -v -count=1 -tags scale -timeout 40m ./test/scale/
# The same SCALE_PODS, SCALE_STORM and SCALE_PHASES shape the kubelet's side
# (its restart phase restarts the kubelet).
echo "==> scale: the kubelet alone, same probes, on a real node"
SCALE_KUBELET_OUT="${SCALE_KUBELET_OUT:-$PWD/.cache/scale/kubelet.json}" \
  go test -v -count=1 -tags scale -timeout 20m ./test/scale/kubeletside/
