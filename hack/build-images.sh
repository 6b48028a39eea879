#!/usr/bin/env bash
# Builds the test images from Debian's busybox-static, without any registry:
#   probed.local/busybox:latest             a shell and the usual tools
#   probed.local/busybox-stopsignal:latest  the same, with image StopSignal=SIGUSR1
#   probed.local/pause:latest               the sandbox ("pause") image: sleeps forever
# Output: .cache/images/<name>.tar as docker-archive, which carries the full image
# name, so both `ctr -n k8s.io images import` and the Go client's Import take it as is.
# Idempotent: nothing is rebuilt while busybox and this script are unchanged.
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
out=${PROBED_IMAGE_DIR:-$root/.cache/images}
busybox=${BUSYBOX:-/bin/busybox}
images=(busybox busybox-stopsignal pause)

for tool in umoci skopeo "$busybox"; do
  command -v "$tool" >/dev/null 2>&1 || {
    echo "build-images: $tool not found; run hack/install-deps.sh" >&2
    exit 1
  }
done
# The image has no libc: busybox must be static (ldd fails on a static binary).
if ldd "$busybox" >/dev/null 2>&1; then
  echo "build-images: $busybox is dynamically linked (install busybox-static)" >&2
  exit 1
fi

mkdir -p "$out"
stamp=$(cat "$busybox" "${BASH_SOURCE[0]}" | sha256sum | cut -d' ' -f1)
up_to_date=1
for img in "${images[@]}"; do [[ -s $out/$img.tar ]] || up_to_date=0; done
if ((up_to_date)) && [[ $(cat "$out/.stamp" 2>/dev/null) == "$stamp" ]]; then
  echo "build-images: up to date in $out"
  exit 0
fi

work=$(mktemp -d "${TMPDIR:-/tmp}/probed-images.XXXXXX")
trap 'rm -rf "$work"' EXIT
layout=$work/oci
bundle=$work/bundle

umoci init --layout "$layout"
umoci new --image "$layout:base"
umoci unpack --image "$layout:base" "$bundle"

# The root filesystem: one static busybox and a symlink per applet.
rootfs=$bundle/rootfs
mkdir -p "$rootfs"/{bin,etc,tmp,root,home/probe,proc,sys,dev,run,var}
install -m 0755 "$busybox" "$rootfs/bin/busybox"
for applet in $("$busybox" --list); do
  [[ $applet == busybox ]] || ln -sf busybox "$rootfs/bin/$applet"
done
chmod 1777 "$rootfs/tmp"
chmod 0700 "$rootfs/root"
cat >"$rootfs/etc/passwd" <<'EOF'
root:x:0:0:root:/root:/bin/sh
probe:x:1000:1000:probe:/home/probe:/bin/sh
nobody:x:65534:65534:nobody:/nonexistent:/bin/false
EOF
cat >"$rootfs/etc/group" <<'EOF'
root:x:0:
probe:x:1000:
nogroup:x:65534:
EOF
chown 1000:1000 "$rootfs/home/probe"

umoci repack --image "$layout:base" "$bundle"
umoci config --image "$layout:base" --tag busybox \
  --config.env PATH=/bin --config.workingdir / --config.cmd sh
umoci config --image "$layout:busybox" --tag busybox-stopsignal --config.stopsignal SIGUSR1
# pid 1 of a pod sandbox only has to exist; CRI kills it with SIGKILL.
umoci config --image "$layout:busybox" --tag pause \
  --clear config.cmd --config.entrypoint /bin/sleep --config.entrypoint 2147483647

for img in "${images[@]}"; do
  skopeo --insecure-policy copy --quiet "oci:$layout:$img" \
    "docker-archive:$work/$img.tar:probed.local/$img:latest"
  mv -f "$work/$img.tar" "$out/$img.tar"
done
echo "$stamp" >"$out/.stamp"
echo "build-images: built ${images[*]} in $out"
