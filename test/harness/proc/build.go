package proc

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/probed-dev/probed/test/harness/repo"
)

// BuildOptions say how Build compiles; the zero value inherits the caller's
// Go settings (CGO_ENABLED, GOFLAGS), as make test's tiers set them.
type BuildOptions struct {
	// Race builds with the race detector (and cgo, which it needs): a data
	// race in the child then makes it exit 66.
	Race bool
	// Shipped builds as the release does: static (CGO_ENABLED=0), -trimpath.
	Shipped bool
	// Tags are extra build tags.
	Tags []string
}

// Build compiles the main package pkg of probed's module ("./cmd/probed")
// into out. Its error carries the compiler's output.
func Build(ctx context.Context, out, pkg string, o BuildOptions) error {
	root, err := repo.Root()
	if err != nil {
		return err
	}
	args := []string{"build", "-o", out}
	env := os.Environ()
	if o.Race {
		args = append(args, "-race")
		env = append(env, "CGO_ENABLED=1")
	}
	if o.Shipped {
		args = append(args, "-trimpath")
		env = append(env, "CGO_ENABLED=0")
	}
	if len(o.Tags) > 0 {
		args = append(args, "-tags", strings.Join(o.Tags, ","))
	}
	cmd := exec.CommandContext(ctx, "go", append(args, pkg)...)
	cmd.Dir, cmd.Env = root, env
	if b, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("go build %s: %v\n%s", pkg, err, b)
	}
	return nil
}

// BuildTB builds pkg into a test's temporary directory, failing the test if
// it does not compile, and returns the binary's path.
func BuildTB(tb testing.TB, pkg string, o BuildOptions) string {
	tb.Helper()
	out := filepath.Join(tb.TempDir(), filepath.Base(pkg))
	if err := Build(context.Background(), out, pkg, o); err != nil {
		tb.Fatal(err)
	}
	return out
}
