package controlplane

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/probed-dev/probed/test/harness/proc"
)

// etcd is a single-member etcd on two free loopback ports, plain HTTP (it is
// reachable from loopback only and lives for one test run).
type etcd struct {
	proc      *proc.Process
	clientURL string
	dataDir   string
	// memDir is dataDir when that is on tmpfs, removed by stop.
	memDir string
}

// startEtcd starts etcd and waits until /health says true. A lost race for a
// free port is retried with new ports.
//
// Its data goes to tmpfs (/dev/shm) unless the control plane is detached (a
// demo, which its PID files stop later): etcd 3.4 has no --unsafe-no-fsync,
// and on a shared disk its WAL fsyncs can stall for seconds while the tiers'
// builds write beside it, which stalls every request of the API server.
func startEtcd(ctx context.Context, bin, runDir string, detached bool) (*etcd, error) {
	dataDir, memDir := filepath.Join(runDir, "etcd-data"), ""
	if !detached {
		if d, err := newMemDir(etcdMemPrefix); err == nil {
			dataDir, memDir = d, d
		}
	}
	var lastErr error
	for attempt := 0; attempt < 3; attempt++ {
		e, err := tryStartEtcd(ctx, bin, runDir, dataDir, detached)
		if err == nil {
			e.dataDir, e.memDir = dataDir, memDir
			return e, nil
		}
		lastErr = err
		if !errors.Is(err, errPortTaken) {
			break
		}
	}
	if memDir != "" {
		_ = os.RemoveAll(memDir)
	}
	return nil, lastErr
}

// tryStartEtcd starts etcd once; on error nothing is left running.
func tryStartEtcd(ctx context.Context, bin, runDir, dataDir string, detached bool) (*etcd, error) {
	clientPort, err := freePort()
	if err != nil {
		return nil, err
	}
	peerPort, err := freePort()
	if err != nil {
		return nil, err
	}
	clientURL := fmt.Sprintf("http://127.0.0.1:%d", clientPort)
	peerURL := fmt.Sprintf("http://127.0.0.1:%d", peerPort)
	args := []string{
		"--name=probed-test",
		"--data-dir=" + dataDir,
		"--listen-client-urls=" + clientURL,
		"--advertise-client-urls=" + clientURL,
		"--listen-peer-urls=" + peerURL,
		"--initial-advertise-peer-urls=" + peerURL,
		"--initial-cluster=probed-test=" + peerURL,
		"--initial-cluster-state=new",
		"--logger=zap",
		"--log-level=warn",
		// No etcd auto-compaction: as in a real cluster, kube-apiserver
		// compacts (every 5 min), so watch resumption behaves the same.
	}
	child, err := startProcess("etcd", filepath.Join(runDir, "etcd.log"), bin, args, detached)
	if err != nil {
		return nil, err
	}
	e := &etcd{proc: child, clientURL: clientURL}
	if err := e.waitHealthy(ctx); err != nil {
		_ = child.Stop(2 * time.Second)
		return nil, err
	}
	return e, nil
}

func (e *etcd) waitHealthy(ctx context.Context) error {
	client := &http.Client{Timeout: time.Second}
	var last string
	err := poll(ctx, 20*time.Millisecond, func() (bool, error) {
		if done, _ := e.proc.Exited(); done {
			return false, startFailure(e.proc, "etcd exited during start")
		}
		resp, err := client.Get(e.clientURL + "/health")
		if err != nil {
			last = err.Error()
			return false, nil
		}
		body, _ := io.ReadAll(io.LimitReader(resp.Body, 1024))
		resp.Body.Close()
		last = fmt.Sprintf("%d %s", resp.StatusCode, body)
		return resp.StatusCode == http.StatusOK && strings.Contains(string(body), `"health":"true"`), nil
	})
	if err != nil && ctx.Err() != nil {
		return startFailure(e.proc, "etcd not healthy at %s (last: %s): %v", e.clientURL, last, err)
	}
	return err
}

func (e *etcd) stop() error {
	err := e.proc.Stop(10 * time.Second)
	if e.memDir != "" {
		err = errors.Join(err, os.RemoveAll(e.memDir))
	}
	return err
}
