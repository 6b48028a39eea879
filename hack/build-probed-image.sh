#!/usr/bin/env bash
# Builds probed's container image without a Docker engine or a registry: the
# same image the Dockerfile describes (a static binary at /probed on an empty
# base, non-root by default, OCI labels), assembled with umoci and written by
# skopeo as a docker-archive that containerd imports as is:
#
#   .cache/images/probed.tar    docker.io/library/probed:dev  (= "probed:dev")
#
# deploy/daemonset.yaml references probed:dev with imagePullPolicy
# IfNotPresent, which containerd resolves to docker.io/library/probed:dev, so
# the kubelet never pulls.
#
# Idempotent: the binary is always rebuilt (Go's cache makes that fast when
# nothing changed); the image is rebuilt only when the binary, the labels or
# this script changed.
#
# Environment: IMAGE (default probed:dev), VERSION (default: git describe, as
# the Makefile), PROBED_IMAGE_DIR (default .cache/images).
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"
out=${PROBED_IMAGE_DIR:-$root/.cache/images}
image=${IMAGE:-probed:dev}
version=${VERSION:-$(git describe --tags --always --dirty 2>/dev/null || echo dev)}
revision=$(git rev-parse HEAD 2>/dev/null || echo unknown)
# The commit's time stamps the file and the image, so identical inputs give
# an identical image (and the same digest).
created=$(git log -1 --format=%cI 2>/dev/null || echo 1970-01-01T00:00:00Z)
work_bin=$root/.cache/probed-image
goarch=$(go env GOARCH)

# Keep in step with the Dockerfile's LABELs.
labels=(
  "org.opencontainers.image.title=probed"
  "org.opencontainers.image.description=Node-side Kubernetes probing daemon"
  "org.opencontainers.image.source=https://github.com/probed-dev/probed"
  "org.opencontainers.image.version=$version"
  "org.opencontainers.image.revision=$revision"
  "org.opencontainers.image.licenses=Apache-2.0"
)

for tool in go umoci skopeo; do
  command -v "$tool" >/dev/null 2>&1 || {
    echo "build-probed-image: $tool not found; run hack/install-deps.sh" >&2
    exit 1
  }
done

mkdir -p "$work_bin" "$out"
# The e2e tier and the demo may build at the same time: one at a time.
exec 9>"$work_bin/.lock"
flock 9
echo "build-probed-image: building the static binary (version $version)..."
start=$SECONDS
CGO_ENABLED=0 GOOS=linux GOARCH=$goarch go build -trimpath \
  -ldflags "$(VERSION=$version bash hack/ldflags.sh)" \
  -o "$work_bin/probed.tmp" ./cmd/probed
mv -f "$work_bin/probed.tmp" "$work_bin/probed"
echo "build-probed-image: binary ready in $((SECONDS - start))s ($(du -h "$work_bin/probed" | cut -f1))"

stamp=$( { sha256sum <"$work_bin/probed"; sha256sum <"${BASH_SOURCE[0]}";
           printf '%s\n' "$image" "$created" "${labels[@]}"; } | sha256sum | cut -d' ' -f1)
if [[ -s $out/probed.tar && $(cat "$out/.probed.stamp" 2>/dev/null) == "$stamp" ]]; then
  echo "build-probed-image: $image is up to date ($out/probed.tar)"
  exit 0
fi

echo "build-probed-image: assembling the image with umoci..."
work=$(mktemp -d "${TMPDIR:-/tmp}/probed-image.XXXXXX")
trap 'rm -rf "$work"' EXIT
layout=$work/oci
bundle=$work/bundle
umoci init --layout "$layout"
umoci new --image "$layout:base"
umoci unpack --image "$layout:base" "$bundle"

# FROM scratch + COPY probed /probed: one file, root-owned, nothing else (no
# shell, no libc, no /etc/passwd; the user is numeric).
install -o 0 -g 0 -m 0755 "$work_bin/probed" "$bundle/rootfs/probed"
touch -h -d "$created" "$bundle/rootfs/probed" "$bundle/rootfs"

umoci repack --image "$layout:base" --history.created "$created" \
  --history.created_by "COPY probed /probed # hack/build-probed-image.sh" "$bundle"
cfg=(--image "$layout:base" --tag probed
     --created "$created" --history.created "$created"
     --architecture "$goarch" --os linux
     --config.user 65532:65532
     --config.env PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
     --config.entrypoint /probed
     --config.workingdir /)
for l in "${labels[@]}"; do cfg+=(--config.label "$l"); done
umoci config "${cfg[@]}"

echo "build-probed-image: writing $image as a docker-archive..."
skopeo --insecure-policy copy --quiet "oci:$layout:probed" "docker-archive:$work/probed.tar:$image"
mv -f "$work/probed.tar" "$out/probed.tar"
echo "$stamp" >"$out/.probed.stamp"
echo "build-probed-image: built $image in $out/probed.tar ($(du -h "$out/probed.tar" | cut -f1))"
