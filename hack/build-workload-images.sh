#!/usr/bin/env bash
# Builds the workload images that the end-to-end tier and examples/demo run,
# offline (no registry), on top of hack/build-images.sh's busybox image:
#   probed.local/probe-target:latest   busybox + /bin/probe-target (test/workloads/probe-target),
#                                      a static Go binary; entrypoint /bin/probe-target
# Output: .cache/images/probe-target.tar as docker-archive (carries the image name).
# Idempotent: nothing is rebuilt while the busybox image, the program and this
# script are unchanged.
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
out=${PROBED_IMAGE_DIR:-$root/.cache/images}
GO=${GO:-go}

for tool in umoci skopeo "$GO"; do
  command -v "$tool" >/dev/null 2>&1 || {
    echo "build-workload-images: $tool not found; run hack/install-deps.sh" >&2
    exit 1
  }
done

# The base: probed.local/busybox:latest.
PROBED_IMAGE_DIR=$out bash "$root/hack/build-images.sh" >/dev/null

work=$(mktemp -d "${TMPDIR:-/tmp}/probed-workload-images.XXXXXX")
trap 'rm -rf "$work"' EXIT

# A static binary; -trimpath and no build ID make it reproducible, so its hash
# can decide whether the image is stale.
(cd "$root" && CGO_ENABLED=0 GOOS=linux "$GO" build -trimpath -ldflags '-s -w -buildid=' \
  -o "$work/probe-target" ./test/workloads/probe-target)

stamp=$(cat "$work/probe-target" "$out/busybox.tar" "${BASH_SOURCE[0]}" | sha256sum | cut -d' ' -f1)
if [[ -s $out/probe-target.tar && $(cat "$out/.workload-stamp" 2>/dev/null) == "$stamp" ]]; then
  echo "build-workload-images: up to date in $out"
  exit 0
fi

layout=$work/oci
bundle=$work/bundle
skopeo --insecure-policy copy --quiet "docker-archive:$out/busybox.tar" "oci:$layout:busybox"
umoci unpack --image "$layout:busybox" "$bundle"
install -m 0755 "$work/probe-target" "$bundle/rootfs/bin/probe-target"
umoci repack --image "$layout:probe-target" "$bundle"
umoci config --image "$layout:probe-target" \
  --config.env PATH=/bin --config.workingdir / \
  --clear config.cmd --config.entrypoint /bin/probe-target \
  --config.label org.opencontainers.image.title=probe-target

skopeo --insecure-policy copy --quiet "oci:$layout:probe-target" \
  "docker-archive:$work/probe-target.tar:probed.local/probe-target:latest"
mv -f "$work/probe-target.tar" "$out/probe-target.tar"
echo "$stamp" >"$out/.workload-stamp"
echo "build-workload-images: built probed.local/probe-target:latest in $out/probe-target.tar"
