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
# probed-webhook:dev), VERSION (default: git describe, as the Makefile),
# PROBED_IMAGE_DIR (default .cache/images).
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"
out=${PROBED_IMAGE_DIR:-$root/.cache/images}
version=${VERSION:-$(git describe --tags --always --dirty 2>/dev/null || echo dev)}
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

# build_image NAME IMAGE PACKAGE DESCRIPTION: the binary ./PACKAGE as /NAME
# in IMAGE, written to $out/NAME.tar.
build_image() {
  local name=$1 image=$2 pkg=$3 description=$4
  # Keep in step with the Dockerfile's LABELs.
  local labels=(
    "org.opencontainers.image.title=$name"
    "org.opencontainers.image.description=$description"
    "org.opencontainers.image.source=https://github.com/probed-dev/probed"
    "org.opencontainers.image.version=$version"
    "org.opencontainers.image.revision=$revision"
    "org.opencontainers.image.licenses=Apache-2.0"
  )
  echo "build-probed-image: building the static binary $name (version $version)..."
  start=$SECONDS
  CGO_ENABLED=0 GOOS=linux GOARCH=$goarch go build -trimpath \
    -ldflags "$(VERSION=$version bash hack/ldflags.sh)" \
    -o "$work_bin/$name.tmp" "./$pkg"
  mv -f "$work_bin/$name.tmp" "$work_bin/$name"
  echo "build-probed-image: binary ready in $((SECONDS - start))s ($(du -h "$work_bin/$name" | cut -f1))"

  stamp=$( { sha256sum <"$work_bin/$name"; sha256sum <"${BASH_SOURCE[0]}";
             printf '%s\n' "$image" "$created" "${labels[@]}"; } | sha256sum | cut -d' ' -f1)
  if [[ -s $out/$name.tar && $(cat "$out/.$name.stamp" 2>/dev/null) == "$stamp" ]]; then
    echo "build-probed-image: $image is up to date ($out/$name.tar)"
    return 0
  fi

  echo "build-probed-image: assembling the image with umoci..."
  work=$(mktemp -d "${TMPDIR:-/tmp}/probed-image.XXXXXX")
  trap 'rm -rf "$work"' EXIT
  local layout=$work/oci bundle=$work/bundle
  umoci init --layout "$layout"
  umoci new --image "$layout:base"
  umoci unpack --image "$layout:base" "$bundle"

  # FROM scratch + COPY <name> /<name>: one file, root-owned, nothing else (no
  # shell, no libc, no /etc/passwd; the user is numeric).
  install -o 0 -g 0 -m 0755 "$work_bin/$name" "$bundle/rootfs/$name"
  touch -h -d "$created" "$bundle/rootfs/$name" "$bundle/rootfs"

  umoci repack --image "$layout:base" --history.created "$created" \
    --history.created_by "COPY $name /$name # hack/build-probed-image.sh" "$bundle"
  local cfg=(--image "$layout:base" --tag "$name"
       --created "$created" --history.created "$created"
       --architecture "$goarch" --os linux
       --config.user 65532:65532
       --config.env PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
       --config.entrypoint "/$name"
       --config.workingdir /)
  for l in "${labels[@]}"; do cfg+=(--config.label "$l"); done
  umoci config "${cfg[@]}"

  echo "build-probed-image: writing $image as a docker-archive..."
  skopeo --insecure-policy copy --quiet "oci:$layout:$name" "docker-archive:$work/$name.tar:$image"
  mv -f "$work/$name.tar" "$out/$name.tar"
  echo "$stamp" >"$out/.$name.stamp"
  echo "build-probed-image: built $image in $out/$name.tar ($(du -h "$out/$name.tar" | cut -f1))"
  rm -rf "$work"
  trap - EXIT
}

mkdir -p "$work_bin" "$out"
# The e2e tier and the demo may build at the same time: one at a time.
exec 9>"$work_bin/.lock"
flock 9
build_image probed "${IMAGE:-probed:dev}" cmd/probed "Node-side Kubernetes probing daemon"
build_image probed-webhook "${WEBHOOK_IMAGE:-probed-webhook:dev}" cmd/probed-webhook "probed's adoption webhook"
