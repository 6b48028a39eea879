//go:build footprint

package main

import (
	"net/http"
	_ "net/http/pprof" // the footprint measurement's heap profiles
	"os"
)

// A build for measurements only (test/integration's footprint test builds
// probed with -tags footprint): net/http/pprof on PROBED_PPROF_ADDR, a
// loopback address, apart from probed's authenticated endpoints. Release
// builds have no such listener.
func init() {
	if addr := os.Getenv("PROBED_PPROF_ADDR"); addr != "" {
		go func() { _ = http.ListenAndServe(addr, nil) }() //nolint:gosec // measurement builds only, loopback
	}
}
