// Package version carries the build's version, stamped through -ldflags.
package version

// Version is set at build time with -X github.com/probed-dev/probed/pkg/version.Version=<v>.
var Version = "dev"
