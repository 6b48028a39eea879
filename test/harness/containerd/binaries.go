package containerd

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"github.com/probed-dev/probed/test/harness/repo"
)

// BinDirEnv overrides where the containerd build (containerd,
// containerd-shim-runc-v2, ctr) is looked up; SystemEnv=1 picks the
// machine's own (Debian's 1.6) instead, for the older-runtime compat runs.
const (
	BinDirEnv = "PROBED_CONTAINERD_BIN_DIR"
	SystemEnv = "PROBED_CONTAINERD_SYSTEM"
)

// defaultBinary is containerd 2.x as hack/build-containerd.sh builds it into
// <repo>/.cache/containerd/<version>/bin, or the system's containerd when
// $PROBED_CONTAINERD_SYSTEM=1.
func defaultBinary() (string, error) {
	if os.Getenv(SystemEnv) == "1" {
		return "/usr/bin/containerd", nil
	}
	dir := os.Getenv(BinDirEnv)
	if dir == "" {
		root, err := repo.Root()
		if err != nil {
			return "", err
		}
		v, err := pinnedVersion(filepath.Join(root, "test", "tools", "containerd", "go.mod"))
		if err != nil {
			return "", err
		}
		dir = filepath.Join(root, ".cache", "containerd", v, "bin")
	}
	bin := filepath.Join(dir, "containerd")
	if _, err := os.Stat(bin); err != nil {
		return "", fmt.Errorf("%w: %s (run hack/build-containerd.sh)", ErrMissingBinaries, bin)
	}
	return bin, nil
}

// pinnedVersion reads the containerd version test/tools/containerd/go.mod requires.
func pinnedVersion(gomod string) (string, error) {
	f, err := os.Open(gomod)
	if err != nil {
		return "", err
	}
	defer f.Close()
	s := bufio.NewScanner(f)
	for s.Scan() {
		if f := strings.Fields(s.Text()); len(f) == 3 && f[0] == "require" && f[1] == "github.com/containerd/containerd/v2" {
			return f[2], nil
		}
	}
	return "", fmt.Errorf("%s: no require line for github.com/containerd/containerd/v2", gomod)
}

// majorVersion is the major version the binary reports, e.g. 2 for
// "containerd github.com/containerd/containerd/v2 v2.4.2 module" and 1 for
// Debian's "containerd github.com/containerd/containerd 1.6.20~ds1 …".
func majorVersion(binary string) (int, error) {
	out, err := exec.Command(binary, "--version").Output()
	if err != nil {
		return 0, fmt.Errorf("%s --version: %w", binary, err)
	}
	f := strings.Fields(string(out))
	if len(f) < 3 {
		return 0, fmt.Errorf("%s --version: unexpected output %q", binary, out)
	}
	v := strings.TrimPrefix(f[2], "v")
	switch {
	case strings.HasPrefix(v, "1."):
		return 1, nil
	case strings.HasPrefix(v, "2."):
		return 2, nil
	}
	return 0, fmt.Errorf("%s --version: unknown version %q", binary, f[2])
}

// shimPath is the PATH containerd runs with: its own directory first, so
// that a containerd 2 build finds its own runc shim, not the system's.
func shimPath(binary string) string {
	return "PATH=" + filepath.Dir(binary) + ":/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
}
