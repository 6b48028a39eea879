#!/usr/bin/env bash
# Installs the Debian packages the test tiers and the demo need. Idempotent.
set -euo pipefail
pkgs=(etcd-server containerd runc umoci skopeo docker-registry busybox-static containernetworking-plugins
      iproute2 iptables nftables conntrack prometheus)
missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  echo ">> installing Debian packages: ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -q
  apt-get install -y -q --no-install-recommends "${missing[@]}"
fi
# Debian's packages may try to start services; the tests start their own, with state in temp dirs.
for svc in containerd etcd prometheus docker-registry; do
  if command -v systemctl >/dev/null 2>&1 && systemctl is-active -q "$svc" 2>/dev/null; then
    systemctl stop "$svc" || true
  fi
done
