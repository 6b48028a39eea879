#!/usr/bin/env bash
# Builds probed's container images without a Docker engine or a registry:
# the images the Dockerfile describes (a static binary on an empty base,
# non-root by default, OCI labels), assembled with umoci and written by
# skopeo as docker-archives that containerd imports as is:
#
#   .cache/images/probed.tar          docker.io/library/probed:dev          (= "probed:dev")
#   .cache/images/probed-webhook.tar  docker.io/library/probed-webhook:dev  (= "probed-webhook:dev")
#
# Two images, not one: the DaemonSet runs on every node, which should not
# pull the adoption webhook's binary (as large again) to run only probed.
# Both are built from the same commit with the same version, so the webhook
# judges probes exactly as the daemon of that version does.
#
# deploy/ references probed:dev and probed-webhook:dev with imagePullPolicy
# IfNotPresent, which containerd resolves to docker.io/library/<name>:dev, so
# the kubelet never pulls.
#
# Idempotent: the binaries are always rebuilt (Go's cache makes that fast
# when nothing changed); an image is rebuilt only when its binary, the
# labels or this script changed.
#
# Environment: IMAGE (default probed:dev), WEBHOOK_IMAGE (default
# probed-webhook:dev), VERSION (default: hack/version.sh, as the Makefile),
# PROBED_IMAGE_DIR (default .cache/images).
#
# --release (`make image`): the release images instead, for every
# architecture in ARCHES (default "amd64 arm64"), Go cross-compiling: one
# multi-architecture OCI archive per image, REPO:TAG and WEBHOOK_REPO:TAG
# (defaults probed, probed-webhook and the version), with a CycloneDX SBOM
# of each binary, in PROBED_RELEASE_DIR (default .cache/release). Load one
# with `skopeo copy oci-archive:FILE:REF docker://...` or `ctr images import`.
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"
out=${PROBED_IMAGE_DIR:-$root/.cache/images}
version=${VERSION:-$(bash hack/version.sh)}
revision=$(git rev-parse HEAD 2>/dev/null || echo unknown)
# The commit's time stamps the file and the image, so identical inputs give
# an identical image (and the same digest).
created=$(git log -1 --format=%cI 2>/dev/null || echo 1970-01-01T00:00:00Z)
work_bin=$root/.cache/probed-image
goarch=$(go env GOARCH)

for tool in go umoci skopeo; do
  command -v "$tool" >/dev/null 2>&1 || {
    echo "build-probed-image: $tool not found; run hack/install-deps.sh" >&2
    exit 1
  }
done

# set_labels NAME DESCRIPTION: the image's OCI labels, in step with the
# Dockerfile's LABELs.
set_labels() {
  labels=(
    "org.opencontainers.image.title=$1"
    "org.opencontainers.image.description=$2"
    "org.opencontainers.image.source=https://github.com/probed-dev/probed"
    "org.opencontainers.image.version=$version"
    "org.opencontainers.image.revision=$revision"
    "org.opencontainers.image.licenses=Apache-2.0"
  )
}

# build_binary NAME PACKAGE ARCH OUT: the static binary ./PACKAGE for linux/ARCH.
build_binary() {
  local name=$1 pkg=$2 arch=$3 bin=$4
  echo "build-probed-image: building the static binary $name for linux/$arch (version $version)..."
  local start=$SECONDS
  CGO_ENABLED=0 GOOS=linux GOARCH=$arch go build -trimpath \
    -ldflags "$(VERSION=$version bash hack/ldflags.sh)" \
    -o "$bin.tmp" "./$pkg"
  mv -f "$bin.tmp" "$bin"
  echo "build-probed-image: binary ready in $((SECONDS - start))s ($(du -h "$bin" | cut -f1))"
}

# add_image LAYOUT NAME BINARY ARCH TAG: FROM scratch + COPY BINARY /NAME for
# linux/ARCH, with $labels, as TAG in the OCI layout LAYOUT (made if absent).
add_image() {
  local layout=$1 name=$2 bin=$3 arch=$4 tag=$5
  local bundle
  bundle=$(mktemp -d "${TMPDIR:-/tmp}/probed-bundle.XXXXXX")
  rm -rf "$bundle"
  [[ -d $layout ]] || umoci init --layout "$layout"
  umoci new --image "$layout:$tag"
  umoci unpack --image "$layout:$tag" "$bundle"
  # One file, root-owned, nothing else (no shell, no libc, no /etc/passwd;
  # the user is numeric).
  install -o 0 -g 0 -m 0755 "$bin" "$bundle/rootfs/$name"
  touch -h -d "$created" "$bundle/rootfs/$name" "$bundle/rootfs"
  umoci repack --image "$layout:$tag" --history.created "$created" \
    --history.created_by "COPY $name /$name # hack/build-probed-image.sh" "$bundle"
  rm -rf "$bundle"
  local cfg=(--image "$layout:$tag"
       --created "$created" --history.created "$created"
       --architecture "$arch" --os linux
       --config.user 65532:65532
       --config.env PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
       --config.entrypoint "/$name"
       --config.workingdir /)
  for l in "${labels[@]}"; do cfg+=(--config.label "$l"); done
  umoci config "${cfg[@]}"
}

# build_image NAME IMAGE PACKAGE DESCRIPTION: the host's image of ./PACKAGE
# as a docker-archive $out/NAME.tar that containerd imports as IMAGE.
build_image() {
  local name=$1 image=$2 pkg=$3 description=$4
  set_labels "$name" "$description"
  build_binary "$name" "$pkg" "$goarch" "$work_bin/$name"
  stamp=$( { sha256sum <"$work_bin/$name"; sha256sum <"${BASH_SOURCE[0]}";
             printf '%s\n' "$image" "$created" "${labels[@]}"; } | sha256sum | cut -d' ' -f1)
  if [[ -s $out/$name.tar && $(cat "$out/.$name.stamp" 2>/dev/null) == "$stamp" ]]; then
    echo "build-probed-image: $image is up to date ($out/$name.tar)"
    return 0
  fi
  echo "build-probed-image: assembling the image with umoci..."
  work=$(mktemp -d "${TMPDIR:-/tmp}/probed-image.XXXXXX")
  trap 'rm -rf "$work"' EXIT
  add_image "$work/oci" "$name" "$work_bin/$name" "$goarch" "$name"
  echo "build-probed-image: writing $image as a docker-archive..."
  skopeo --insecure-policy copy --quiet "oci:$work/oci:$name" "docker-archive:$work/$name.tar:$image"
  mv -f "$work/$name.tar" "$out/$name.tar"
  echo "$stamp" >"$out/.$name.stamp"
  echo "build-probed-image: built $image in $out/$name.tar ($(du -h "$out/$name.tar" | cut -f1))"
  rm -rf "$work"
  trap - EXIT
}

# release_image NAME REPO PACKAGE DESCRIPTION: REPO:$tag for every arch in
# $arches, as one multi-architecture OCI archive $release/NAME_$tag.oci.tar,
# and a CycloneDX SBOM of each architecture's binary beside it.
release_image() {
  local name=$1 repo=$2 pkg=$3 description=$4
  set_labels "$name" "$description"
  work=$(mktemp -d "${TMPDIR:-/tmp}/probed-release.XXXXXX")
  trap 'rm -rf "$work"' EXIT
  local platforms=()
  for arch in $arches; do
    build_binary "$name" "$pkg" "$arch" "$work/$name-$arch"
    add_image "$work/oci" "$name" "$work/$name-$arch" "$arch" "$arch"
    "$sbom" bin -json -std -version "$version" -output "$release/${name}_${tag}_linux_$arch.sbom.cdx.json" "$work/$name-$arch"
    platforms+=("$arch=linux/$arch")
  done
  go run ./hack/ociindex "$work/oci" "$repo:$tag" "${platforms[@]}"
  umoci gc --layout "$work/oci"
  tar -C "$work/oci" --sort=name --mtime="$created" --owner=0 --group=0 --numeric-owner \
    -cf "$release/${name}_$tag.oci.tar" .
  # skopeo reads it back: the index and each platform's image resolve.
  for arch in $arches; do
    skopeo --override-arch "$arch" --override-os linux inspect --config \
      "oci-archive:$release/${name}_$tag.oci.tar:$repo:$tag" >/dev/null
  done
  echo "build-probed-image: built $repo:$tag for $arches in $release/${name}_$tag.oci.tar"
  rm -rf "$work"
  trap - EXIT
}

mkdir -p "$work_bin" "$out"
# The e2e tier and the demo may build at the same time: one at a time.
exec 9>"$work_bin/.lock"
flock 9
if [[ ${1:-} == --release ]]; then
  arches=${ARCHES:-amd64 arm64}
  # An image tag may not hold "+" or start with "." or "-".
  tag=${TAG:-${version//+/-}}
  release=${PROBED_RELEASE_DIR:-$root/.cache/release}
  mkdir -p "$release"
  sbom=$(bash hack/sbom.sh)/cyclonedx-gomod
  release_image probed "${REPO:-probed}" cmd/probed "Node-side Kubernetes probing daemon"
  release_image probed-webhook "${WEBHOOK_REPO:-probed-webhook}" cmd/probed-webhook "probed's adoption webhook"
  exit 0
fi
build_image probed "${IMAGE:-probed:dev}" cmd/probed "Node-side Kubernetes probing daemon"
build_image probed-webhook "${WEBHOOK_IMAGE:-probed-webhook:dev}" cmd/probed-webhook "probed's adoption webhook"
