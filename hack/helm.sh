#!/usr/bin/env bash
# Makes sure helm is built and prints the directory holding it (to prepend to
# PATH). Debian has no helm package, so it is built from the helm.sh/helm/v3
# module pinned in hack/tools/helm/go.mod (a module of its own: helm's
# dependencies stay out of probed's go.mod) into the git-ignored
# .cache/helm/<version>/. About 1-2 minutes from a cold Go cache; a no-op
# when that version is built already.
set -euo pipefail
main() {
  local root mod version dir
  root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
  mod="$root/hack/tools/helm"
  version="$(awk '$1 == "require" && $2 == "helm.sh/helm/v3" {print $3; exit}
                  $1 == "helm.sh/helm/v3" && $2 ~ /^v/ {print $2; exit}' "$mod/go.mod")"
  if [[ ! "$version" =~ ^v3\.[0-9]+\.[0-9]+$ ]]; then
    echo "helm.sh: cannot read the helm.sh/helm/v3 version from $mod/go.mod (got '$version')" >&2
    exit 1
  fi
  # helm's default Kubernetes version (helm template, helm lint) is its
  # client-go's minor, as upstream's Makefile stamps it; without it, 1.20.
  local cgo kminor ldflags
  cgo="$(awk '$1 == "k8s.io/client-go" {print $2; exit}' "$mod/go.mod")"
  if [[ ! "$cgo" =~ ^v0\.([0-9]+)\. ]]; then
    echo "helm.sh: cannot read k8s.io/client-go's version from $mod/go.mod (got '$cgo')" >&2
    exit 1
  fi
  kminor="${BASH_REMATCH[1]}"
  ldflags="-s -w -X helm.sh/helm/v3/internal/version.version=$version"
  for pkg in helm.sh/helm/v3/pkg/lint/rules helm.sh/helm/v3/pkg/chartutil; do
    ldflags+=" -X $pkg.k8sVersionMajor=1 -X $pkg.k8sVersionMinor=$kminor"
  done
  dir="$root/.cache/helm/$version"
  mkdir -p "$dir"
  # Two test packages may ask at once: serialise.
  exec 9>"$dir/.lock"
  flock 9
  local key="$version $(go env GOVERSION) $ldflags"
  if [[ -x "$dir/helm" && "$(cat "$dir/.stamp" 2>/dev/null)" == "$key" ]]; then
    echo "$dir"
    return
  fi
  echo "helm.sh: building helm $version into $dir" >&2
  (cd "$mod" && CGO_ENABLED=0 go build -trimpath -ldflags "$ldflags" \
    -o "$dir/helm.tmp" helm.sh/helm/v3/cmd/helm) >&2
  mv "$dir/helm.tmp" "$dir/helm"
  echo "$key" >"$dir/.stamp"
  echo "$dir"
}
main "$@"
