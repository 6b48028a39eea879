#!/usr/bin/env bash
# Builds the Kubernetes binaries the integration and e2e tiers run, from the
# k8s.io/kubernetes module pinned in test/tools/go.mod, into
# .cache/k8s/<version>/bin/ (or $PROBED_K8S_BIN_DIR).
#
#   hack/build-k8s.sh                  # all four
#   hack/build-k8s.sh kube-apiserver   # only some
#   K8S_VERSION=1.34 hack/build-k8s.sh kube-apiserver
#                                      # another minor (compat tier), pinned in
#                                      # test/tools/k8s-1.34/go.mod
#   K8S_VERSION=1.34 hack/build-k8s.sh --bindir|--version
#                                      # print where that version's binaries
#                                      # go, or its exact version; build nothing
#
# Idempotent: a binary is skipped when its stamp matches the current build key
# (version, Go version, cgo, ldflags) and it reports the right version.
# GOCACHE/GOMODCACHE/GOFLAGS are left to their defaults so CI can cache
# ~/.cache/go-build and ~/go/pkg/mod between runs.
set -euo pipefail

# Everything is in functions called on the last line: bash then parses the
# whole file before running it, so editing the script while a long build runs
# cannot make the running copy execute garbage.

all=(kube-apiserver kube-controller-manager kube-scheduler kubelet)

main() {
  local root tools version major minor bindir
  root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
  tools="$root/test/tools"
  # Other minors have a module each, test/tools/k8s-<minor>/go.mod.
  if [[ -n "${K8S_VERSION:-}" && -f "$tools/k8s-$K8S_VERSION/go.mod" ]]; then
    tools="$tools/k8s-$K8S_VERSION"
  fi

  # One place to bump: test/tools/go.mod (the default version, which must
  # match KubernetesVersion in test/harness/controlplane), or
  # test/tools/k8s-<minor>/go.mod for the compat tier's versions.
  version="$(awk '$1 == "require" && $2 == "k8s.io/kubernetes" {print $3; exit}
                  $1 == "k8s.io/kubernetes" && $2 ~ /^v/ {print $2; exit}' "$tools/go.mod")"
  if [[ ! "$version" =~ ^v([0-9]+)\.([0-9]+)\.[0-9]+$ ]]; then
    echo "build-k8s: cannot read the k8s.io/kubernetes version from $tools/go.mod (got '$version')" >&2
    exit 1
  fi
  major="${BASH_REMATCH[1]}"
  minor="${BASH_REMATCH[2]}"
  if [[ -n "${K8S_VERSION:-}" && "$K8S_VERSION" != "$major.$minor" ]]; then
    echo "build-k8s: K8S_VERSION=$K8S_VERSION: no test/tools/k8s-$K8S_VERSION/go.mod, and test/tools/go.mod pins $version" >&2
    exit 2
  fi
  # Same override as the Go harness; not for another minor, whose binaries
  # must not land in a directory meant for the default one.
  bindir="$root/.cache/k8s/$version/bin"
  [[ -n "${K8S_VERSION:-}" ]] || bindir="${PROBED_K8S_BIN_DIR:-$bindir}"
  case "${1:-}" in
    --bindir) printf '%s\n' "$bindir"; return ;;
    --version) printf '%s\n' "$version"; return ;;
  esac

  local want=("$@") b
  ((${#want[@]})) || want=("${all[@]}")
  for b in "${want[@]}"; do
    [[ " ${all[*]} " == *" $b "* ]] || { echo "build-k8s: unknown binary '$b' (known: ${all[*]})" >&2; exit 2; }
  done

  mkdir -p "$bindir"
  # Two engineers (or two test packages) may call this at once: serialise.
  exec 9>"$bindir/.lock"
  flock 9

  cd "$tools"
  local ldflags
  ldflags="$(version_ldflags "$version" "$major" "$minor")"
  for b in "${want[@]}"; do
    build_one "$b" "$version" "$bindir" "$ldflags"
  done
}

# version_ldflags prints the -X flags upstream's hack/lib/version.sh sets, in
# both packages that carry them; without them the binaries report v0.0.0.
# The module's publish time is the build date: identical inputs then give
# identical binaries, and Go build cache hits.
version_ldflags() {
  local version=$1 major=$2 minor=$3 info build_date ldflags pkg
  info="$(go mod download -json "k8s.io/kubernetes@$version" | sed -n 's/.*"Info": *"\([^"]*\)".*/\1/p')"
  build_date="$(sed -n 's/.*"Time": *"\([^"]*\)".*/\1/p' "$info" 2>/dev/null || true)"
  build_date="${build_date:-1970-01-01T00:00:00Z}"
  ldflags="-s -w"
  for pkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
    ldflags+=" -X $pkg.gitVersion=$version -X $pkg.gitMajor=$major -X $pkg.gitMinor=$minor"
    ldflags+=" -X $pkg.gitTreeState=clean -X $pkg.buildDate=$build_date"
  done
  printf '%s' "$ldflags"
}

build_one() {
  local b=$1 version=$2 bindir=$3 ldflags=$4
  local out="$bindir/$b" stamp="$bindir/.$b.stamp" key got start
  key="$version|$(go env GOVERSION)|cgo=0|$ldflags"

  if [[ -x "$out" && -f "$stamp" && "$(cat "$stamp")" == "$key" ]] &&
     [[ "$("$out" --version 2>&1 || true)" == "Kubernetes $version" ]]; then
    echo "$b $version is up to date ($out)"
    return
  fi
  echo "building $b $version (first build takes ~2-5 min)..."
  start=$SECONDS
  # Build to a temp name and rename, so a reader never sees a half-written binary.
  rm -f "$out.tmp"
  # All four static. Besides portability this matters for build time:
  # CGO_ENABLED changes the cache key of every package above net, so a cgo
  # kubelet recompiled nearly everything the other three had built (measured:
  # ~230 CPU-seconds more for a cold build of all four).
  CGO_ENABLED=0 go build -trimpath -ldflags "$ldflags" -o "$out.tmp" "k8s.io/kubernetes/cmd/$b"
  got="$("$out.tmp" --version 2>&1 || true)"
  if [[ "$got" != "Kubernetes $version" ]]; then
    echo "build-k8s: $b reports '$got', want 'Kubernetes $version'" >&2
    rm -f "$out.tmp"
    exit 1
  fi
  mv -f "$out.tmp" "$out"
  printf '%s' "$key" >"$stamp"
  echo "built $b in $((SECONDS - start))s: $got"
}

main "$@"
