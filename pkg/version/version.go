// Package version carries the build's version, stamped through -ldflags
// (the Makefile, hack/build-probed-image.sh and the Dockerfile set them from
// hack/version.sh and the commit).
package version

import (
	"fmt"
	"runtime"

	"github.com/prometheus/client_golang/prometheus"
)

// Set at build time with -X github.com/probed-dev/probed/pkg/version.<Name>=<value>.
var (
	// Version is hack/version.sh's semantic version: a release tag such as
	// v0.2.0, or between releases v0.2.0-dev.14.g1a2b3c4 (VERSION, the
	// commits since it changed, the commit).
	// v0.0.0-dev: a build without it (go build, go run).
	Version = "v0.0.0-dev"
	// Revision is the full commit hash.
	Revision = "unknown"
	// BuildDate is the commit's date (RFC 3339, UTC), so that the same
	// source gives the same binary.
	BuildDate = "unknown"
)

// String is what --version prints: "<binary> <version> (revision <rev>, built <date>, <go>)".
func String(binary string) string {
	return fmt.Sprintf("%s %s (revision %s, built %s, %s %s/%s)", binary, Version, Revision, BuildDate, runtime.Version(), runtime.GOOS, runtime.GOARCH)
}

// RegisterBuildInfo registers <namespace>_build_info{version,revision,goversion} 1.
func RegisterBuildInfo(reg prometheus.Registerer, namespace string) {
	g := prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Namespace: namespace,
		Name:      "build_info",
		Help:      "Always 1; its labels say which build is running.",
	}, []string{"version", "revision", "goversion"})
	g.WithLabelValues(Version, Revision, runtime.Version()).Set(1)
	reg.MustRegister(g)
}
