#!/usr/bin/env bash
# Pushes `make image`'s release archives to a registry with skopeo (`make
# push`): probed and probed-webhook, every architecture the archive holds
# (one multi-architecture index each), as
#
#   $REGISTRY/probed:$TAG  and  $REGISTRY/probed-webhook:$TAG
#
# the names the chart (image.registry, image.tag) and docs/install.md's
# kustomize wrapper install from. Prints each reference with its digest
# (image.digest pins it).
#
# Environment: REGISTRY (required: host[:port][/path], e.g.
# registry.example.com/team); TAG (default: what `make image` names the
# archives, hack/version.sh's version); PROBED_RELEASE_DIR (default
# .cache/release); PUSH_FLAGS, more skopeo copy flags: --dest-creds
# user:password, --dest-authfile, --dest-cert-dir, or --dest-tls-verify=false
# for a registry that speaks plain HTTP (a local one). skopeo also reads
# the credentials `skopeo login` and `docker login` store.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"
registry=${REGISTRY:-}
if [[ -z $registry ]]; then
  echo "push-images: set REGISTRY, e.g. make push REGISTRY=registry.example.com/team TAG=0.2.0" >&2
  exit 2
fi
registry=${registry%/}
# No scheme, digest or tag: a colon only in the host's port.
if [[ $registry == *://* || $registry == *@* || ($registry == */* && ${registry##*/} == *:*) ]]; then
  echo "push-images: REGISTRY=$registry: want host[:port][/path], without a scheme, tag or digest" >&2
  exit 2
fi
version=${VERSION:-$(bash hack/version.sh)}
tag=${TAG:-${version//+/-}}
release=${PROBED_RELEASE_DIR:-$root/.cache/release}
command -v skopeo >/dev/null 2>&1 || {
  echo "push-images: skopeo not found; run hack/install-deps.sh" >&2
  exit 1
}
# shellcheck disable=SC2206 # PUSH_FLAGS is a list of flags
flags=(${PUSH_FLAGS:-})
for name in probed probed-webhook; do
  archive=$release/${name}_$tag.oci.tar
  if [[ ! -s $archive ]]; then
    echo "push-images: $archive is missing: build it first with make image TAG=$tag" >&2
    exit 1
  fi
done
for name in probed probed-webhook; do
  archive=$release/${name}_$tag.oci.tar
  ref=$registry/$name:$tag
  digestfile=$(mktemp)
  # The archive holds one image index; --all copies it and every image in it.
  skopeo copy --all --quiet --digestfile "$digestfile" "${flags[@]}" "oci-archive:$archive" "docker://$ref"
  echo "push-images: $ref@$(cat "$digestfile")"
  rm -f "$digestfile"
done
