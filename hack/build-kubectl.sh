#!/usr/bin/env bash
# Makes sure a kubectl of the pinned Kubernetes minor is available: prints the
# directory holding it (to prepend to PATH), building one into the k8s bin dir
# when none is installed. Debian has no kubectl package, so it is built from
# the published k8s.io/kubectl in a throwaway module (test/tools pins only what
# build-k8s.sh builds). About 2 minutes from a cold Go cache.
set -euo pipefail
main() {
  local root k8sv bindir kv ldflags pkg mod
  root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
  k8sv=$(awk '$1 == "require" && $2 == "k8s.io/kubernetes" {print $3; exit}
              $1 == "k8s.io/kubernetes" && $2 ~ /^v/ {print $2; exit}' "$root/test/tools/go.mod")
  bindir=${PROBED_K8S_BIN_DIR:-$root/.cache/k8s/$k8sv/bin}
  if [[ -x $bindir/kubectl ]]; then echo "$bindir"; return; fi
  if command -v kubectl >/dev/null; then dirname "$(command -v kubectl)"; return; fi
  # hack/prebuild.sh and a tier may ask at once: one builds, the other waits.
  mkdir -p "$bindir"
  exec 9>"$bindir/.kubectl.lock"
  flock 9
  if [[ -x $bindir/kubectl ]]; then echo "$bindir"; return; fi
  echo "build-kubectl: kubectl not installed: building it from k8s.io/kubectl" >&2
  kv=v0.${k8sv#v1.}
  ldflags="-s -w"
  for pkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
    ldflags+=" -X $pkg.gitVersion=$k8sv -X $pkg.gitMajor=1 -X $pkg.gitMinor=$(cut -d. -f2 <<<"$k8sv") -X $pkg.gitTreeState=clean"
  done
  mod=$root/.cache/kubectl-build
  mkdir -p "$mod" "$bindir"
  cat >"$mod/main.go" <<'GO'
package main

import (
	"k8s.io/component-base/cli"
	"k8s.io/kubectl/pkg/cmd"
	"k8s.io/kubectl/pkg/cmd/util"
)

func main() {
	if err := cli.RunNoErrOutput(cmd.NewDefaultKubectlCommand()); err != nil {
		util.CheckErr(err)
	}
}
GO
  (cd "$mod" && { [[ -f go.mod ]] || go mod init kubectl-build >/dev/null 2>&1; } &&
    go get "k8s.io/kubectl@$kv" "k8s.io/component-base@$kv" >&2 && go mod tidy >&2 &&
    CGO_ENABLED=0 go build -trimpath -ldflags "$ldflags" -o "$bindir/kubectl.tmp" .) >&2
  mv -f "$bindir/kubectl.tmp" "$bindir/kubectl"
  echo "$bindir"
}
main "$@"
