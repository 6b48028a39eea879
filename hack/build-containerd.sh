#!/usr/bin/env bash
# Builds containerd 2.x (containerd, containerd-shim-runc-v2, ctr) from the
# github.com/containerd/containerd/v2 module pinned in
# test/tools/containerd/go.mod, into .cache/containerd/<version>/bin/ (or
# $PROBED_CONTAINERD_BIN_DIR). Debian ships only containerd 1.6, which is past
# its end of life; the test tiers and the demo run this build. runc stays
# Debian's (1.1.5): containerd 2.4 runs containers with it on these cgroup v1
# machines, and building runc needs cgo and libseccomp.
#
#   hack/build-containerd.sh            # build (a no-op when up to date)
#   hack/build-containerd.sh --bindir   # print where the binaries go
#   hack/build-containerd.sh --version  # print the pinned version
#
# Static (CGO_ENABLED=0), with upstream's tags for a build without the btrfs,
# devmapper and zfs snapshotters. About 1 minute from a cold Go cache.
set -euo pipefail

bins=(containerd containerd-shim-runc-v2 ctr)

main() {
  local root mod version bindir
  root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
  mod="$root/test/tools/containerd"
  version="$(awk '$1 == "require" && $2 == "github.com/containerd/containerd/v2" {print $3; exit}' "$mod/go.mod")"
  if [[ ! "$version" =~ ^v2\.[0-9]+\.[0-9]+$ ]]; then
    echo "build-containerd: cannot read the containerd version from $mod/go.mod (got '$version')" >&2
    exit 1
  fi
  bindir="${PROBED_CONTAINERD_BIN_DIR:-$root/.cache/containerd/$version/bin}"
  case "${1:-}" in
    --bindir) printf '%s\n' "$bindir"; return ;;
    --version) printf '%s\n' "$version"; return ;;
    "") ;;
    *) echo "build-containerd: unknown argument '$1'" >&2; exit 2 ;;
  esac

  mkdir -p "$bindir"
  exec 9>"$bindir/.lock"
  flock 9
  cd "$mod"
  local pkg=github.com/containerd/containerd/v2 ldflags b tags
  ldflags="-s -w -X $pkg/version.Version=$version -X $pkg/version.Revision=module -X $pkg/version.Package=$pkg"
  for b in "${bins[@]}"; do
    tags="urfave_cli_no_docs"
    case "$b" in
      containerd) tags+=" no_btrfs no_devmapper no_zfs" ;;
      containerd-shim-runc-v2) tags+=" no_grpc" ;;
    esac
    build_one "$b" "$version" "$bindir" "$ldflags" "$tags" "$pkg/cmd/$b"
  done
}

build_one() {
  local b=$1 version=$2 bindir=$3 ldflags=$4 tags=$5 pkg=$6
  local out="$bindir/$b" stamp="$bindir/.$b.stamp" key start
  key="$version|$(go env GOVERSION)|cgo=0|$tags|$ldflags"
  if [[ -x "$out" && -f "$stamp" && "$(cat "$stamp")" == "$key" ]]; then
    echo "$b $version is up to date ($out)"
    return
  fi
  echo "building $b $version..."
  start=$SECONDS
  rm -f "$out.tmp"
  CGO_ENABLED=0 go build -trimpath -tags "$tags" -ldflags "$ldflags" -o "$out.tmp" "$pkg"
  mv -f "$out.tmp" "$out"
  printf '%s' "$key" >"$stamp"
  echo "built $b in $((SECONDS - start))s"
}

main "$@"
