package version

import (
	"bufio"
	"go/version"
	"os"
	"regexp"
	"runtime"
	"strings"
	"testing"
)

// minToolchain is the oldest Go release probed may be built with: go1.26.8
// carries the fixes for crypto/tls (unbounded post-handshake messages,
// GO-2026-6090) and encoding/asn1 (recursion depth, GO-2026-5972), both on
// paths probed serves (the endpoints' TLS, client certificates in
// TokenReviews). Raise it, the toolchain line and the Dockerfile together.
const minToolchain = "go1.26.8"

// TestToolchainPinned holds the pin: go.mod names a toolchain line at least
// minToolchain, the Dockerfile's build stage uses that exact release, and
// the toolchain running this test (CI's, which also builds the release
// images) is no older.
func TestToolchainPinned(t *testing.T) {
	toolchain := goModLine(t, "../../go.mod", "toolchain")
	if toolchain == "" {
		t.Fatalf("go.mod has no toolchain line; want toolchain %s or newer", minToolchain)
	}
	if !version.IsValid(toolchain) || version.Compare(toolchain, minToolchain) < 0 {
		t.Errorf("go.mod: toolchain %s; want %s or newer", toolchain, minToolchain)
	}

	docker, err := os.ReadFile("../../Dockerfile")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^ARG GO_VERSION=(\S+)$`).FindSubmatch(docker)
	if m == nil {
		t.Fatal("Dockerfile: no ARG GO_VERSION=<version>")
	}
	if got := "go" + string(m[1]); got != toolchain {
		t.Errorf("Dockerfile: GO_VERSION=%s (%s); want go.mod's toolchain %s exactly, not a floating tag", m[1], got, toolchain)
	}
	if !regexp.MustCompile(`(?m)^FROM .*golang:\$\{GO_VERSION\}\S* AS build$`).Match(docker) {
		t.Error("Dockerfile: the build stage is not FROM golang:${GO_VERSION}")
	}

	if v := runtime.Version(); version.IsValid(v) && version.Compare(v, minToolchain) < 0 {
		t.Errorf("built with %s, older than the pinned %s: install %s or newer", v, minToolchain, toolchain)
	}
}

// goModLine returns the argument of the first top-level directive named key.
func goModLine(t *testing.T, path, key string) string {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	s := bufio.NewScanner(f)
	for s.Scan() {
		if fields := strings.Fields(s.Text()); len(fields) == 2 && fields[0] == key {
			return fields[1]
		}
	}
	if err := s.Err(); err != nil {
		t.Fatal(err)
	}
	return ""
}
