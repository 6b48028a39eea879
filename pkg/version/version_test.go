package version

import (
	"runtime"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

func TestBuildInfo(t *testing.T) {
	Version, Revision, BuildDate = "v0.2.0", "0123abc", "2026-11-25T00:00:00Z"
	t.Cleanup(func() { Version, Revision, BuildDate = "v0.0.0-dev", "unknown", "unknown" })
	reg := prometheus.NewRegistry()
	RegisterBuildInfo(reg, "probed")
	want := `# HELP probed_build_info Always 1; its labels say which build is running.
# TYPE probed_build_info gauge
probed_build_info{goversion="` + runtime.Version() + `",revision="0123abc",version="v0.2.0"} 1
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "probed_build_info"); err != nil {
		t.Error(err)
	}
	if s := String("probed"); !strings.HasPrefix(s, "probed v0.2.0 (revision 0123abc, built 2026-11-25T00:00:00Z, go") {
		t.Errorf("String = %q", s)
	}
}
