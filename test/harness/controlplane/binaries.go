package controlplane

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"

	"github.com/probed-dev/probed/test/harness/repo"
)

// KubernetesVersion is the version hack/build-k8s.sh builds and this harness
// runs. Keep it in step with test/tools/go.mod.
const KubernetesVersion = "v1.37.2"

// BinDirEnv overrides where the Kubernetes binaries are looked up.
const BinDirEnv = "PROBED_K8S_BIN_DIR"

// VersionEnv names the version of the binaries to run instead of
// KubernetesVersion: the compat tier runs other minors through it.
const VersionEnv = "PROBED_K8S_VERSION"

// WantVersion is the version Start requires kube-apiserver to report:
// $PROBED_K8S_VERSION if set, else KubernetesVersion. Checking it keeps a
// stale or mixed-up PROBED_K8S_BIN_DIR from passing as the version a tier
// claims to test.
func WantVersion() string {
	if v := os.Getenv(VersionEnv); v != "" {
		return v
	}
	return KubernetesVersion
}

// ErrBinaryMissing is wrapped by Start's error when a binary is not built or
// installed, so tests can tell "skip" from "broken".
var ErrBinaryMissing = errors.New("binary missing")

// BinDir returns the directory holding the Kubernetes binaries: $PROBED_K8S_BIN_DIR
// if set, else <repo root>/.cache/k8s/<WantVersion()>/bin (repo.Root).
func BinDir() (string, error) {
	if d := os.Getenv(BinDirEnv); d != "" {
		return d, nil
	}
	root, err := repo.Root()
	if err != nil {
		return "", fmt.Errorf("%w; or set %s", err, BinDirEnv)
	}
	return filepath.Join(root, ".cache", "k8s", WantVersion(), "bin"), nil
}

// findBinary returns the path of an executable, wrapping ErrBinaryMissing
// with a hint on how to get it when it is not there.
func findBinary(path, hint string) (string, error) {
	st, err := os.Stat(path)
	if err != nil || st.IsDir() || st.Mode()&0o111 == 0 {
		return "", fmt.Errorf("%w: %s not found or not executable (%s)", ErrBinaryMissing, path, hint)
	}
	return path, nil
}

// etcdBinary is Debian's etcd-server by default; PROBED_ETCD_BIN overrides.
func etcdBinary() (string, error) {
	if p := os.Getenv("PROBED_ETCD_BIN"); p != "" {
		return findBinary(p, "set by PROBED_ETCD_BIN")
	}
	if p, err := exec.LookPath("etcd"); err == nil {
		return p, nil
	}
	return findBinary("/usr/bin/etcd", "run hack/install-deps.sh")
}
