package controlplane

import (
	"context"
	"fmt"
	"path/filepath"
	"strconv"
	"time"

	"k8s.io/client-go/kubernetes"

	"github.com/probed-dev/probed/test/harness/proc"
)

const (
	// issuer doubles as the default audience: tokens requested without
	// audiences get it, and the apiserver accepts them.
	issuer          = "https://kubernetes.default.svc.cluster.local"
	serviceIPRange  = "10.96.0.0/16"
	firstServiceIP  = "10.96.0.1" // the kubernetes Service's ClusterIP
	apiServerLog    = "kube-apiserver.log"
	apiServerGrace  = 15 * time.Second
	readyzRequestTO = 2 * time.Second
)

// apiServer is the kube-apiserver process. Its port and flags are fixed at
// creation so that a restart looks, to clients, like the same server coming back.
type apiServer struct {
	bin    string
	port   int
	args   []string
	runDir string
	proc   *proc.Process // nil while stopped
	// detached: see Options.Detached.
	detached bool
}

func newAPIServer(bin, runDir string, port int, etcdURL string, p *pki, extra []string) *apiServer {
	args := []string{
		"--etcd-servers=" + etcdURL,
		"--bind-address=127.0.0.1",
		"--secure-port=" + strconv.Itoa(port),
		// An explicit loopback address: otherwise the apiserver picks the
		// host's default-route interface. With no endpoint reconciler it does
		// not try to publish that (loopback is invalid in Endpoints).
		"--advertise-address=127.0.0.1",
		"--endpoint-reconciler-type=none",
		"--cert-dir=" + filepath.Join(runDir, "apiserver-certs"), // default is /var/run/kubernetes
		"--tls-cert-file=" + p.servingCertFile,
		"--tls-private-key-file=" + p.servingKeyFile,
		"--client-ca-file=" + p.caFile,
		"--kubelet-client-certificate=" + p.kubeletClientCertFile,
		"--kubelet-client-key=" + p.kubeletClientKeyFile,
		// RBAC is what probed's ClusterRole is tested against; Node is what
		// a kubelet in the e2e tier needs.
		"--authorization-mode=Node,RBAC",
		"--service-account-issuer=" + issuer,
		"--service-account-key-file=" + p.saPubFile,
		"--service-account-signing-key-file=" + p.saKeyFile,
		"--api-audiences=" + issuer,
		"--service-cluster-ip-range=" + serviceIPRange,
		// On top of the defaults (which include ServiceAccount and
		// ValidatingAdmissionPolicy; named here so the intent is visible).
		"--enable-admission-plugins=NamespaceLifecycle,ServiceAccount,NodeRestriction,ValidatingAdmissionPolicy",
		"--allow-privileged=true",
		"--profiling=false",
		"--v=1",
	}
	// Last, so that a repeated flag overrides ours.
	args = append(args, extra...)
	return &apiServer{bin: bin, port: port, args: args, runDir: runDir}
}

// start launches the process and waits for /readyz to answer ok through
// client, failing early with the log tail if the process exits.
func (a *apiServer) start(ctx context.Context, client kubernetes.Interface) error {
	if a.proc != nil {
		if done, _ := a.proc.Exited(); !done {
			return fmt.Errorf("kube-apiserver already running (pid %d)", a.proc.PID())
		}
	}
	child, err := startProcess("kube-apiserver", filepath.Join(a.runDir, apiServerLog), a.bin, a.args, a.detached)
	if err != nil {
		return err
	}
	a.proc = child
	var last string
	err = poll(ctx, 50*time.Millisecond, func() (bool, error) {
		if done, _ := child.Exited(); done {
			return false, startFailure(child, "kube-apiserver exited during start")
		}
		rctx, cancel := context.WithTimeout(ctx, readyzRequestTO)
		defer cancel()
		body, err := client.Discovery().RESTClient().Get().AbsPath("/readyz").DoRaw(rctx)
		if err != nil {
			last = err.Error()
			if len(body) > 0 {
				last = string(body)
			}
			return false, nil
		}
		return string(body) == "ok", nil
	})
	if err != nil {
		if ctx.Err() != nil {
			err = startFailure(child, "kube-apiserver not ready on port %d (last /readyz: %s): %v", a.port, last, err)
		}
		_ = a.stop()
		return err
	}
	return nil
}

// stop terminates the process; a no-op when it is not running.
func (a *apiServer) stop() error {
	if a.proc == nil {
		return nil
	}
	err := a.proc.Stop(apiServerGrace)
	a.proc = nil
	return err
}

func (a *apiServer) pid() int {
	if a.proc == nil {
		return 0
	}
	return a.proc.PID()
}
