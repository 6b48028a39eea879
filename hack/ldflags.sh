#!/usr/bin/env bash
# Prints the -ldflags every probed binary is built with: stripped, and
# stamped with the version (hack/version.sh), the commit and the commit's
# date (so identical sources give identical binaries). VERSION, REVISION
# and BUILD_DATE override them.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
version=${VERSION:-$(bash hack/version.sh)}
revision=${REVISION:-$(git rev-parse HEAD 2>/dev/null || echo unknown)}
date=${BUILD_DATE:-$(TZ=UTC git log -1 --date=format-local:%Y-%m-%dT%H:%M:%SZ --format=%cd 2>/dev/null || echo unknown)}
pkg=github.com/probed-dev/probed/pkg/version
echo "-s -w -X $pkg.Version=$version -X $pkg.Revision=$revision -X $pkg.BuildDate=$date"
