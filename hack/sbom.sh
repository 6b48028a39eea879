#!/usr/bin/env bash
# Makes sure cyclonedx-gomod (the SBOM generator of `make image`) is built and
# prints the directory holding it. Built from the module pinned in
# hack/tools/sbom/go.mod (a module of its own, as hack/tools/helm) into the
# git-ignored .cache/sbom/<version>/; a no-op when that version is built.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
mod="$root/hack/tools/sbom"
version="$(awk '$1 == "github.com/CycloneDX/cyclonedx-gomod" {print $2; exit}
                $1 == "require" && $2 == "github.com/CycloneDX/cyclonedx-gomod" {print $3; exit}' "$mod/go.mod")"
if [[ ! "$version" =~ ^v[0-9]+\.[0-9]+\.[0-9]+$ ]]; then
  echo "sbom.sh: cannot read cyclonedx-gomod's version from $mod/go.mod (got '$version')" >&2
  exit 1
fi
dir="$root/.cache/sbom/$version"
mkdir -p "$dir"
exec 9>"$dir/.lock"
flock 9
if [[ ! -x $dir/cyclonedx-gomod ]]; then
  echo "sbom.sh: building cyclonedx-gomod $version into $dir" >&2
  (cd "$mod" && CGO_ENABLED=0 go build -trimpath -o "$dir/cyclonedx-gomod.tmp" \
    github.com/CycloneDX/cyclonedx-gomod/cmd/cyclonedx-gomod) >&2
  mv "$dir/cyclonedx-gomod.tmp" "$dir/cyclonedx-gomod"
fi
echo "$dir"
