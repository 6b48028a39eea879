#!/usr/bin/env bash
# Prints the version every build is stamped with, always a semantic version
# with a leading v (krew, Helm and image tags take it as it is):
#   - at a commit tagged vX.Y.Z, with no local change: that tag (a release);
#   - otherwise, v<VERSION>-dev.<N>.g<commit>[.dirty]: VERSION (in the tree)
#     is the release being prepared, and <N> counts the commits since
#     VERSION last changed, so versions between releases sort in order and
#     before the release itself.
# Without git (a source archive): v<VERSION>-dev.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
base=$(tr -d '[:space:]' <VERSION)
if [[ ! $base =~ ^(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)$ ]]; then
  echo "version.sh: VERSION holds '$base', not X.Y.Z" >&2
  exit 1
fi
if ! git rev-parse --git-dir >/dev/null 2>&1; then
  echo "v$base-dev"
  exit 0
fi
dirty=
if [[ -n $(git status --porcelain --untracked-files=no 2>/dev/null) ]]; then
  dirty=.dirty
fi
if [[ -z $dirty ]]; then
  for tag in $(git tag --points-at HEAD 2>/dev/null); do
    if [[ $tag =~ ^v(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)$ ]]; then
      echo "$tag"
      exit 0
    fi
  done
fi
since=$(git log -1 --format=%H -- VERSION 2>/dev/null || true)
n=$(git rev-list --count "${since:+$since..}HEAD")
echo "v$base-dev.$n.g$(git rev-parse --short=7 HEAD)$dirty"
