// Package containerd is the runtime implementation on containerd's native
// client (--runtime-type=containerd), and ContainerdCRI, which runs execs
// through CRI and kills and stops through the native client
// (--runtime-type=containerd-cri).
package containerd

import (
	"context"
	"fmt"
	"sync"

	containerd "github.com/containerd/containerd/v2/client"
	"github.com/containerd/containerd/v2/pkg/namespaces"
	"github.com/probed-dev/probed/pkg/cri"
	"github.com/probed-dev/probed/pkg/cri/internal/execout"
	"google.golang.org/grpc"
)

// Containerd is the Runtime on containerd's native client API (the
// containers and tasks services), the way `ctr task exec` works.
//
// The client library is v1.7, whose gRPC API (containers, tasks, version,
// introspection v1) is the same on containerd 1.6, 1.7 and 2.x.
//
// Requirements on the node: probed must share the FIFO directory with
// containerd (the shim opens the exec's FIFOs by path), and must see the host's
// /proc (hostPID) to kill a timed-out command's children; without that it
// kills the command alone and logs why.
type Containerd struct {
	client  *containerd.Client
	ns      string
	fifoDir string
	targets targetCache
	budget  *execout.Budget

	procWarnOnce sync.Once
}

var _ cri.Runtime = (*Containerd)(nil)

// New returns the native client on conn, with exec output within budget.
func New(conn *grpc.ClientConn, o cri.Options, budget *execout.Budget) (*Containerd, error) {
	// No default namespace: NewWithConn would then make a blocking call to read
	// namespace labels. Every call sets the namespace on its context instead.
	client, err := containerd.NewWithConn(conn)
	if err != nil {
		_ = conn.Close()
		return nil, fmt.Errorf("containerd client: %w", err)
	}
	return &Containerd{client: client, ns: o.Namespace, fifoDir: o.FIFODir, budget: budget}, nil
}

// Name is the runtime label in metrics.
func (r *Containerd) Name() string { return cri.TypeNative }

// Ready asks containerd for its version.
func (r *Containerd) Ready(ctx context.Context) error {
	if _, err := r.client.Version(ctx); err != nil {
		return fmt.Errorf("containerd not ready: %w", err)
	}
	return nil
}

// Close closes the connection. Calls in flight fail.
func (r *Containerd) Close() error { return r.client.Close() }

func (r *Containerd) withNamespace(ctx context.Context) context.Context {
	return namespaces.WithNamespace(ctx, r.ns)
}

// parseID accepts only containerd:// IDs; the native client cannot reach CRI-O.
func (r *Containerd) parseID(containerID string) (string, error) {
	id, err := cri.ParseContainerID(containerID)
	if err != nil {
		return "", err
	}
	if id.Type != cri.TypeContainerd {
		return "", fmt.Errorf("container %s: %w: the native containerd client serves only containerd:// IDs", containerID, cri.ErrUnsupportedRuntime)
	}
	return id.ID, nil
}
