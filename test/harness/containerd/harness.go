// Package containerd starts a private containerd (2.x, built from its Go
// module by hack/build-containerd.sh, with Debian's runc) for the runtime
// test tier and the node harness. Everything it creates lives under one
// temporary run dir and one cgroup parent, so Stop can find and remove all of it
// without touching anything else on the machine: processes are stopped by PID,
// never by name.
//
// Images come from hack/build-images.sh; no registry is needed.
package containerd

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
	"time"

	versionapi "github.com/containerd/containerd/api/services/version/v1"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/types/known/emptypb"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/probed-dev/probed/test/harness/repo"
)

// Image names, as built by hack/build-images.sh.
const (
	BusyboxImage           = "probed.local/busybox:latest"
	BusyboxStopSignalImage = "probed.local/busybox-stopsignal:latest"
	PauseImage             = "probed.local/pause:latest"
)

// Namespace is the containerd namespace the CRI plugin uses.
const Namespace = "k8s.io"

// Options configure Start. The zero value works from the repository root's
// point of view once hack/build-images.sh has run.
type Options struct {
	// Binary is containerd's path; default the containerd 2.x that
	// hack/build-containerd.sh builds (see defaultBinary).
	Binary string
	// ImageDir holds the image archives; default <repo>/.cache/images.
	ImageDir string
	// Images are the archive base names to import; default busybox,
	// busybox-stopsignal and pause.
	Images []string
	// StartTimeout bounds start-up and image import; default 30s.
	StartTimeout time.Duration
	// RunDir, when set, holds all state instead of a new temporary directory
	// (it is created if missing, and still removed by Stop). Such a dir is
	// never swept as stale: StopRunDir stops what it holds. The node harness
	// uses this so that a containerd can outlive the process that started it.
	RunDir string
	// CgroupParent is the cgroup parent of RunContainer's pods and what Stop
	// sweeps; default /probed-test-<random>. A kubelet given the same path as
	// its cgroupRoot puts its pods there too.
	CgroupParent string
	// CNIConfList, when set, is written as the only network config in the
	// CNI conf dir before containerd starts (pods on the host network, as
	// RunContainer makes them, need none).
	CNIConfList []byte
}

// Containerd is one running private containerd.
type Containerd struct {
	runDir       string
	cgroupParent string
	binary       string
	pid          int
	// exited is closed when the containerd we started has been reaped; nil
	// for a stale one found by sweepStale.
	exited chan struct{}
	conn   *grpc.ClientConn
	cri    runtimeapi.RuntimeServiceClient

	stopOnce sync.Once
	stopErr  error
}

// ErrMissingBinaries is returned by Start when containerd or runc is not installed.
var ErrMissingBinaries = errors.New("containerd or runc not installed (run hack/install-deps.sh)")

// Start launches containerd, waits until both its own API and CRI answer, and
// imports the images. On error everything already started is cleaned up.
func Start(ctx context.Context, opts Options) (_ *Containerd, retErr error) {
	if err := opts.complete(); err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, opts.StartTimeout)
	defer cancel()

	sweepStale()
	runDir := opts.RunDir
	if runDir == "" {
		var err error
		if runDir, err = os.MkdirTemp("", runDirPrefix); err != nil {
			return nil, err
		}
	} else if err := os.MkdirAll(runDir, 0o700); err != nil {
		return nil, err
	}
	cgroupParent := opts.CgroupParent
	if cgroupParent == "" {
		cgroupParent = "/probed-test-" + randomSuffix()
	}
	h := &Containerd{
		runDir:       runDir,
		cgroupParent: cgroupParent,
	}
	defer func() {
		if retErr != nil {
			_ = h.Stop()
		}
	}()
	owner := fmt.Sprintf("%d %s", os.Getpid(), h.cgroupParent)
	if err := os.WriteFile(h.path(ownerFile), []byte(owner), 0o600); err != nil {
		return nil, err
	}
	for _, d := range []string{"root", "state", "opt", "runc", "cni", "fifo", "logs"} {
		if err := os.MkdirAll(h.path(d), 0o700); err != nil {
			return nil, err
		}
	}
	if len(opts.CNIConfList) > 0 {
		if err := os.WriteFile(filepath.Join(h.CNIConfDir(), "10-probed.conflist"), opts.CNIConfList, 0o600); err != nil {
			return nil, err
		}
	}
	major, err := majorVersion(opts.Binary)
	if err != nil {
		return nil, err
	}
	if err := os.WriteFile(h.path("config.toml"), []byte(h.configTOML(major)), 0o600); err != nil {
		return nil, err
	}
	h.binary = opts.Binary
	if err := h.startDaemon(); err != nil {
		return nil, err
	}

	h.conn, err = grpc.NewClient("unix://"+h.Socket(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return nil, err
	}
	h.cri = runtimeapi.NewRuntimeServiceClient(h.conn)
	if err := h.waitReady(ctx); err != nil {
		return nil, fmt.Errorf("%w; log tail:\n%s", err, h.logTail(2048))
	}
	if err := h.importImages(ctx, opts.ImageDir, opts.Images); err != nil {
		return nil, err
	}
	return h, nil
}

// startDaemon starts the containerd process on the run dir's config.
func (h *Containerd) startDaemon() error {
	logFile, err := os.OpenFile(h.LogPath(), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return err
	}
	defer logFile.Close() // the child holds its own descriptor

	cmd := exec.Command(h.binary, "--config", h.path("config.toml"))
	cmd.Stdout, cmd.Stderr = logFile, logFile
	// Its own process group: a Ctrl-C meant for `go test` reaches us, and we stop it in order.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Env = append(os.Environ(), shimPath(h.binary))
	exited := make(chan struct{})
	h.exited = exited
	if err := cmd.Start(); err != nil {
		close(exited)
		return fmt.Errorf("start containerd: %w", err)
	}
	// Not killed with us: if this process dies without Stop, the next Start sweeps it up.
	h.pid = cmd.Process.Pid
	go func() { _ = cmd.Wait(); close(exited) }()
	return os.WriteFile(h.path(pidFile), []byte(strconv.Itoa(h.pid)), 0o600)
}

// Restart stops the containerd process (SIGTERM, as a service manager
// would for an upgrade) and starts it again on the same state. Containers
// keep running under their shims; containerd removes its socket on the way
// out and creates a new one (a new inode) when it starts, which is what a
// client holding a bind mount of the socket file cannot follow.
func (h *Containerd) Restart(ctx context.Context) error {
	if err := h.stopDaemon(); err != nil {
		return err
	}
	if err := h.startDaemon(); err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if err := h.waitReady(ctx); err != nil {
		return fmt.Errorf("%w; log tail:\n%s", err, h.logTail(2048))
	}
	return nil
}

func (o *Options) complete() error {
	if o.Binary == "" {
		b, err := defaultBinary()
		if err != nil {
			return err
		}
		o.Binary = b
	}
	shim := filepath.Join(filepath.Dir(o.Binary), "containerd-shim-runc-v2")
	for _, bin := range []string{o.Binary, shim, "runc"} {
		if _, err := exec.LookPath(bin); err != nil {
			if _, err := exec.LookPath(filepath.Join("/usr/sbin", bin)); err != nil {
				return fmt.Errorf("%w: %s", ErrMissingBinaries, bin)
			}
		}
	}
	if o.ImageDir == "" {
		root, err := repo.Root()
		if err != nil {
			return err
		}
		o.ImageDir = filepath.Join(root, ".cache", "images")
	}
	if len(o.Images) == 0 {
		o.Images = []string{"busybox", "busybox-stopsignal", "pause"}
	}
	if o.StartTimeout == 0 {
		o.StartTimeout = 30 * time.Second
	}
	return nil
}

// waitReady polls until containerd's CRI reports the runtime ready.
func (h *Containerd) waitReady(ctx context.Context) error {
	var last error
	for {
		select {
		case <-h.exited:
			return fmt.Errorf("containerd exited during start-up")
		default:
		}
		rctx, cancel := context.WithTimeout(ctx, time.Second)
		resp, err := h.cri.Status(rctx, &runtimeapi.StatusRequest{})
		cancel()
		if err == nil {
			for _, c := range resp.GetStatus().GetConditions() {
				if c.GetType() == runtimeapi.RuntimeReady && c.GetStatus() {
					return nil
				}
			}
			err = errors.New("RuntimeReady is not true yet")
		}
		last = err
		select {
		case <-ctx.Done():
			return fmt.Errorf("containerd not ready: %v (last error: %v)", ctx.Err(), last)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// Socket is the containerd gRPC socket path (containerd API and CRI).
func (h *Containerd) Socket() string { return h.path("containerd.sock") }

// Endpoint is Socket as a unix:// URL, as --runtime-endpoint takes it.
func (h *Containerd) Endpoint() string { return "unix://" + h.Socket() }

// FIFODir is a private directory for exec FIFOs; point the native runtime at it.
func (h *Containerd) FIFODir() string { return h.path("fifo") }

// RunDir is the temporary directory holding all of this containerd's state.
func (h *Containerd) RunDir() string { return h.runDir }

// LogPath is containerd's own log.
func (h *Containerd) LogPath() string { return h.path("containerd.log") }

// PID is containerd's process ID.
func (h *Containerd) PID() int { return h.pid }

// Version is the running containerd's version and revision, from its own API.
func (h *Containerd) Version(ctx context.Context) (string, error) {
	v, err := versionapi.NewVersionClient(h.conn).Version(ctx, &emptypb.Empty{})
	if err != nil {
		return "", err
	}
	return v.Version + " " + v.Revision, nil
}

// CRI is a CRI runtime client on this containerd, for setting up test pods.
func (h *Containerd) CRI() runtimeapi.RuntimeServiceClient { return h.cri }

func (h *Containerd) path(name string) string { return filepath.Join(h.runDir, name) }

func (h *Containerd) logTail(n int64) string {
	f, err := os.Open(h.LogPath())
	if err != nil {
		return ""
	}
	defer f.Close()
	if st, err := f.Stat(); err == nil && st.Size() > n {
		_, _ = f.Seek(-n, 2)
	}
	b := make([]byte, n)
	k, _ := f.Read(b)
	return string(b[:k])
}

func randomSuffix() string {
	b := make([]byte, 6)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}
