//go:build release

package release

import (
	"fmt"
	"os"
	"testing"

	"go.uber.org/goleak"
)

// release is the one release build the tests share.
var release releaseBuild

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "probed-release-test-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	release.dir = dir
	code := m.Run()
	if err := os.RemoveAll(dir); err != nil {
		fmt.Fprintln(os.Stderr, err)
		code = 1
	}
	if code == 0 {
		if err := goleak.Find(); err != nil {
			fmt.Fprintf(os.Stderr, "release tests: goroutine leak: %v\n", err)
			code = 1
		}
	}
	os.Exit(code)
}
