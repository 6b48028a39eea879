#!/usr/bin/env bash
# Makes sure krew and krew's manifest validator (validate-krew-manifest, what
# krew-index's CI runs) are built and prints the directory holding them. Built
# from the sigs.k8s.io/krew module pinned in hack/tools/krew/go.mod (a module of
# its own) into the git-ignored .cache/krew/<version>/. About 1-2 minutes from
# a cold Go cache; a no-op when that version is built already.
set -euo pipefail
main() {
  local root mod version dir key
  root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
  mod="$root/hack/tools/krew"
  version="$(awk '$1 == "require" && $2 == "sigs.k8s.io/krew" {print $3; exit}' "$mod/go.mod")"
  if [[ ! "$version" =~ ^v[0-9]+\.[0-9]+\.[0-9]+$ ]]; then
    echo "krew.sh: cannot read the sigs.k8s.io/krew version from $mod/go.mod (got '$version')" >&2
    exit 1
  fi
  dir="$root/.cache/krew/$version"
  mkdir -p "$dir"
  exec 9>"$dir/.lock"
  flock 9
  key="$version $(go env GOVERSION)"
  if [[ -x "$dir/krew" && -x "$dir/validate-krew-manifest" && "$(cat "$dir/.stamp" 2>/dev/null)" == "$key" ]]; then
    echo "$dir"
    return
  fi
  echo "krew.sh: building krew $version into $dir" >&2
  (cd "$mod" && CGO_ENABLED=0 go build -trimpath -ldflags "-s -w" -o "$dir/" \
    sigs.k8s.io/krew/cmd/krew sigs.k8s.io/krew/cmd/validate-krew-manifest) >&2
  echo "$key" >"$dir/.stamp"
  echo "$dir"
}
main "$@"
