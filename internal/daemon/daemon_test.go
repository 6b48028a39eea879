package daemon

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/probed-dev/probed/pkg/version"
)

func TestRESTConfig(t *testing.T) {
	kubeconfig := filepath.Join(t.TempDir(), "kubeconfig")
	if err := os.WriteFile(kubeconfig, []byte(`apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: "https://192.0.2.1:6443"}}]
users: [{name: u, user: {token: t}}]
contexts: [{name: x, context: {cluster: c, user: u}}]
current-context: x
`), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, err := RESTConfig("probed-webhook", kubeconfig, 7.5, 11)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Host != "https://192.0.2.1:6443" || cfg.QPS != 7.5 || cfg.Burst != 11 || cfg.UserAgent != "probed-webhook/"+version.Version {
		t.Errorf("config: host %q, QPS %v, burst %d, User-Agent %q", cfg.Host, cfg.QPS, cfg.Burst, cfg.UserAgent)
	}
	if _, err := RESTConfig("probed", filepath.Join(t.TempDir(), "missing"), 1, 1); err == nil || !strings.HasPrefix(err.Error(), "loading the API client config: ") {
		t.Errorf("a missing kubeconfig: %v", err)
	}
}
