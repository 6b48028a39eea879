package controlplane

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/probed-dev/probed/test/harness/proc"
)

// Options configures Start. The zero value is what most tests want.
type Options struct {
	// BinDir holds kube-apiserver. Default: BinDir().
	BinDir string
	// EtcdBinary defaults to $PROBED_ETCD_BIN, then etcd on $PATH, then /usr/bin/etcd.
	EtcdBinary string
	// StartTimeout bounds Start as a whole, and each StartAPIServer (ctx
	// may end them sooner). Default 60s: on two busy cores a start can take
	// several times the ~2.5 s it takes on a quiet machine.
	StartTimeout time.Duration
	// ExtraAPIServerFlags are appended after the harness's flags. A scalar
	// flag given again wins (e.g. "--v=4"); a list flag given again adds to
	// ours (e.g. "--enable-admission-plugins=AlwaysPullImages").
	ExtraAPIServerFlags []string
	// RunDir is where certificates and logs go, and etcd's data when
	// Detached (otherwise it is on tmpfs, removed by Stop). Default: a new
	// temporary directory, removed by Stop. A given RunDir is left in place.
	RunDir string
	// Detached starts etcd and kube-apiserver in their own session and
	// without a parent-death signal, so they outlive this process (a demo
	// that starts a cluster and exits). Stop them with Stop, or later by the
	// PIDs in RunDir/etcd.pid and RunDir/kube-apiserver.pid (always written).
	Detached bool
}

// ControlPlane is a running etcd and kube-apiserver. All methods are safe for
// concurrent use.
type ControlPlane struct {
	// RunDir holds certificates, the kubeconfig and the logs (etcd.log,
	// kube-apiserver.log), and etcd's data when detached.
	RunDir string
	// KubeconfigPath is an admin kubeconfig (O=system:masters) in RunDir.
	KubeconfigPath string
	// CAFile is the PEM CA that signed the serving and client certificates.
	CAFile string
	// Host is the apiserver URL, https://127.0.0.1:<port>.
	Host string

	opts      Options
	removeDir bool
	pki       *pki
	adminCfg  *rest.Config
	client    kubernetes.Interface
	mu        sync.Mutex // guards the processes and stopped
	etcd      *etcd
	apiserver *apiServer
	stopped   bool
}

// Start generates certificates, starts etcd and kube-apiserver, waits for
// /readyz, and prepares the "default" namespace (its default ServiceAccount
// and kube-root-ca.crt ConfigMap). ctx bounds the start only: the processes
// live until Stop. On error nothing is left running, and the error carries
// the tail of the failing process's log.
func Start(ctx context.Context, opts Options) (_ *ControlPlane, err error) {
	if opts.StartTimeout <= 0 {
		opts.StartTimeout = 60 * time.Second
	}
	apiBin, etcdBin, err := opts.binaries()
	if err != nil {
		return nil, err
	}

	cp := &ControlPlane{opts: opts, RunDir: opts.RunDir}
	if cp.RunDir == "" {
		if cp.RunDir, err = os.MkdirTemp("", "probed-controlplane-"); err != nil {
			return nil, err
		}
		cp.removeDir = true
	} else if err := os.MkdirAll(cp.RunDir, 0o755); err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			_ = cp.Stop()
		}
	}()

	if cp.pki, err = newPKI(cp.RunDir); err != nil {
		return nil, fmt.Errorf("certificates: %w", err)
	}
	cp.CAFile = cp.pki.caFile

	sctx, cancel := context.WithTimeout(ctx, opts.StartTimeout)
	defer cancel()
	e, err := startEtcd(sctx, etcdBin, cp.RunDir, opts.Detached)
	if err != nil {
		return nil, err
	}
	cp.mu.Lock()
	cp.etcd = e
	cp.mu.Unlock()

	if err := cp.startFirstAPIServer(sctx, apiBin); err != nil {
		return nil, err
	}
	if err := cp.checkVersion(apiBin); err != nil {
		return nil, err
	}

	cp.KubeconfigPath = filepath.Join(cp.RunDir, "kubeconfig")
	if err := WriteKubeconfig(cp.KubeconfigPath, cp.adminCfg); err != nil {
		return nil, fmt.Errorf("kubeconfig: %w", err)
	}
	if err := cp.EnsureNamespace(sctx, "default"); err != nil {
		return nil, err
	}
	return cp, nil
}

// startFirstAPIServer picks a free port and starts the apiserver, retrying
// with a new port if another process took it between our probe and its bind.
func (cp *ControlPlane) startFirstAPIServer(ctx context.Context, bin string) error {
	var err error
	for attempt := 0; attempt < 3; attempt++ {
		var port int
		if port, err = freePort(); err != nil {
			return err
		}
		cp.Host = fmt.Sprintf("https://127.0.0.1:%d", port)
		cp.adminCfg = adminConfig(cp.Host, cp.pki)
		if cp.client, err = kubernetes.NewForConfig(cp.adminCfg); err != nil {
			return err
		}
		a := newAPIServer(bin, cp.RunDir, port, cp.etcd.clientURL, cp.pki, cp.opts.ExtraAPIServerFlags)
		a.detached = cp.opts.Detached
		cp.mu.Lock()
		cp.apiserver = a
		cp.mu.Unlock()
		if err = a.start(ctx, cp.client); !errors.Is(err, errPortTaken) {
			return err
		}
	}
	return err
}

// checkVersion fails when kube-apiserver is not the version asked for.
func (cp *ControlPlane) checkVersion(bin string) error {
	ver, err := cp.client.Discovery().ServerVersion()
	if err != nil {
		return fmt.Errorf("kube-apiserver version: %w", err)
	}
	if want := WantVersion(); ver.GitVersion != want {
		return fmt.Errorf("kube-apiserver reports %s, want %s (%s; set %s for another version)", ver.GitVersion, want, bin, VersionEnv)
	}
	return nil
}

func (o Options) binaries() (apiserver, etcd string, err error) {
	dir := o.BinDir
	if dir == "" {
		if dir, err = BinDir(); err != nil {
			return "", "", err
		}
	}
	if apiserver, err = findBinary(filepath.Join(dir, "kube-apiserver"), "run hack/build-k8s.sh kube-apiserver, or set "+BinDirEnv); err != nil {
		return "", "", err
	}
	if o.EtcdBinary != "" {
		etcd, err = findBinary(o.EtcdBinary, "from Options.EtcdBinary")
	} else {
		etcd, err = etcdBinary()
	}
	return apiserver, etcd, err
}

// SAKeyFile is the service-account signing key (PEM), for a
// kube-controller-manager's --service-account-private-key-file.
func (cp *ControlPlane) SAKeyFile() string { return cp.pki.saKeyFile }

// RESTConfig returns a new copy of the admin rest.Config.
func (cp *ControlPlane) RESTConfig() *rest.Config { return rest.CopyConfig(cp.adminCfg) }

// Client returns the admin clientset. It keeps working across
// StopAPIServer/StartAPIServer (requests fail while the apiserver is down).
func (cp *ControlPlane) Client() kubernetes.Interface { return cp.client }

// StopAPIServer stops kube-apiserver alone, for outage tests; etcd keeps the state.
func (cp *ControlPlane) StopAPIServer() error {
	cp.mu.Lock()
	defer cp.mu.Unlock()
	if cp.apiserver == nil {
		return nil
	}
	return cp.apiserver.stop()
}

// StartAPIServer starts kube-apiserver again after StopAPIServer, on the same
// port with the same certificates and flags, and waits until it is ready.
func (cp *ControlPlane) StartAPIServer(ctx context.Context) error {
	cp.mu.Lock()
	defer cp.mu.Unlock()
	if cp.stopped {
		return errors.New("control plane is stopped")
	}
	sctx, cancel := context.WithTimeout(ctx, cp.opts.StartTimeout)
	defer cancel()
	return cp.apiserver.start(sctx, cp.client)
}

// LogTails is the last n lines of etcd's and kube-apiserver's logs, for a
// failed run: Stop removes a temporary RunDir with them.
func (cp *ControlPlane) LogTails(n int) string {
	var b strings.Builder
	for _, name := range []string{"etcd.log", apiServerLog} {
		path := filepath.Join(cp.RunDir, name)
		fmt.Fprintf(&b, "--- last %d lines of %s:\n%s\n", n, path, proc.Tail(path, n))
	}
	return b.String()
}

// Stop stops the apiserver, then etcd, each by its PID (SIGTERM, then SIGKILL
// after a grace period), waits until they have exited and removes the
// temporary run directory. It is safe to call more than once.
func (cp *ControlPlane) Stop() error {
	cp.mu.Lock()
	defer cp.mu.Unlock()
	if cp.stopped {
		return nil
	}
	cp.stopped = true
	var errs []error
	if cp.apiserver != nil {
		errs = append(errs, cp.apiserver.stop())
	}
	if cp.etcd != nil {
		errs = append(errs, cp.etcd.stop())
	}
	if cp.removeDir {
		errs = append(errs, os.RemoveAll(cp.RunDir))
	}
	return errors.Join(errs...)
}
