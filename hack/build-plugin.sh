#!/usr/bin/env bash
# Builds `kubectl probed` for krew: one archive per platform (the binary and
# LICENSE) in .cache/dist/, and .cache/dist/probed.yaml, deploy/krew/probed.yaml
# with the version and each archive's SHA256 filled in. Offline: Go
# cross-compiles. VERSION overrides hack/version.sh; DIST overrides the folder.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
version=${VERSION:-$(bash hack/version.sh)}
dist=${DIST:-.cache/dist}
ldflags=$(VERSION=$version bash hack/ldflags.sh)
mkdir -p "$dist"
manifest=$(sed "s/VERSION/$version/g" deploy/krew/probed.yaml)
for platform in linux/amd64 linux/arm64 darwin/amd64 darwin/arm64; do
	os=${platform%/*} arch=${platform#*/}
	work=$(mktemp -d)
	CGO_ENABLED=0 GOOS=$os GOARCH=$arch go build -trimpath -ldflags "$ldflags" -o "$work/kubectl-probed" ./cmd/kubectl-probed
	cp LICENSE "$work/"
	archive=$dist/kubectl-probed_${version}_${os}_${arch}.tar.gz
	# Reproducible: fixed owner, order and times.
	tar --sort=name --owner=0 --group=0 --numeric-owner --mtime=@0 -C "$work" -cf - kubectl-probed LICENSE | gzip -n >"$archive"
	rm -rf "$work"
	sum=$(sha256sum "$archive" | cut -d' ' -f1)
	manifest=${manifest//SHA256_${os}_${arch}/$sum}
	echo "build-plugin: $archive ($sum)"
done
printf '%s\n' "$manifest" >"$dist/probed.yaml"
echo "build-plugin: $dist/probed.yaml"
