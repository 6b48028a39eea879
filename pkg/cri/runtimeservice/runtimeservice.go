// Package runtimeservice is the runtime implementation on the CRI
// RuntimeService over gRPC (--runtime-type=cri), any CRI runtime's.
package runtimeservice

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/probed-dev/probed/pkg/cri"
	"github.com/probed-dev/probed/pkg/cri/internal/execout"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// criSlack is how much longer than the CRI timeout a call may take, so the
// runtime can kill and clean up before we give up on the call. It also bounds
// the wait when a runtime hangs on a child that holds the exec's output open
// (containerd 1.6 does).
const criSlack = 2 * time.Second

// CRI is the Runtime on the CRI RuntimeService (k8s.io/cri-api v1), the
// kubelet's own path. It works with any CRI runtime, CRI-O included.
//
// What the runtime does on timeout is up to it: containerd (1.6, measured)
// kills the command itself, not its children, which then keep ExecSync from
// returning while they hold its output; the call then ends at our own
// deadline, the CRI timeout plus 2s. Timeouts are whole seconds in CRI, so a
// sub-second remainder is rounded up. Output is buffered
// by the runtime (containerd keeps up to 16 MiB per stream and refuses to send
// more than 16 MiB in all); probed reads an answer of at most
// MaxExecAnswerBytes, within the node's output budget, and cuts it to 10 KiB.
type CRI struct {
	conn   *grpc.ClientConn
	rs     runtimeapi.RuntimeServiceClient
	budget *execout.Budget
}

var _ cri.Runtime = (*CRI)(nil)

// New returns the runtime on conn, reading exec answers within budget.
func New(conn *grpc.ClientConn, budget *execout.Budget) *CRI {
	return &CRI{conn: conn, rs: runtimeapi.NewRuntimeServiceClient(conn), budget: budget}
}

// Name is the runtime label in metrics.
func (r *CRI) Name() string { return cri.TypeCRI }

// Close closes the connection. Calls in flight fail.
func (r *CRI) Close() error { return r.conn.Close() }

// Ready asks the runtime for its status and wants RuntimeReady; NetworkReady
// is not needed to exec into or stop a container.
func (r *CRI) Ready(ctx context.Context) error {
	resp, err := r.rs.Status(ctx, &runtimeapi.StatusRequest{})
	if err != nil {
		return fmt.Errorf("CRI runtime not ready: %w", err)
	}
	for _, c := range resp.GetStatus().GetConditions() {
		if c.GetType() == runtimeapi.RuntimeReady {
			if !c.GetStatus() {
				return fmt.Errorf("CRI runtime not ready: %s: %s", c.GetReason(), c.GetMessage())
			}
			return nil
		}
	}
	return errors.New("CRI runtime not ready: no RuntimeReady condition")
}

// ExecInContainer runs cmd through CRI ExecSync. timeout <= 0 means none.
func (r *CRI) ExecInContainer(ctx context.Context, containerID string, cmd []string, timeout time.Duration) ([]byte, int, error) {
	id, err := cri.ParseContainerID(containerID)
	if err != nil {
		return nil, -1, err
	}
	if len(cmd) == 0 {
		return nil, -1, fmt.Errorf("exec in container %s: %w", containerID, cri.ErrEmptyCommand)
	}
	return r.ExecSync(ctx, containerID, id.ID, cmd, timeout, CeilSeconds(timeout))
}

// ExecSync makes the ExecSync call with criTimeout (whole seconds, 0 none)
// for the runtime, and waits up to criTimeout plus criSlack for its answer.
// An error once timeout has passed is a *cri.TimeoutError. ContainerdCRI
// calls it with its own timeout.
func (r *CRI) ExecSync(ctx context.Context, containerID, id string, cmd []string, timeout time.Duration, criTimeout int64) ([]byte, int, error) {
	req := &runtimeapi.ExecSyncRequest{ContainerId: id, Cmd: cmd, Timeout: criTimeout}
	var budget time.Duration
	if criTimeout > 0 {
		budget = time.Duration(criTimeout)*time.Second + criSlack
	}
	callCtx, cancel := execout.WithOptionalTimeout(ctx, budget)
	defer cancel()
	start := time.Now()
	resp, release, err := r.execSyncCall(callCtx, req)
	if err != nil {
		var be *cri.OutputBudgetError
		switch {
		case ctx.Err() != nil:
			return nil, -1, fmt.Errorf("exec in container %s: %w", containerID, ctx.Err())
		case errors.As(err, &be):
			be.ContainerID = containerID
			return nil, -1, be
		// An error once the timeout has passed is the timeout, whatever its code:
		// containerd reports it as Unknown "timeout ... exceeded".
		case timeout > 0 && (status.Code(err) == codes.DeadlineExceeded || time.Since(start) >= timeout):
			return nil, -1, &cri.TimeoutError{ContainerID: containerID, After: timeout}
		}
		return nil, -1, fmt.Errorf("exec in container %s: %w", containerID, r.classify(ctx, id, err))
	}
	defer release()
	return execout.Combine(resp.GetStdout(), resp.GetStderr()), int(resp.GetExitCode()), nil
}

// execSyncCall makes the ExecSync call and reads its answer, at most
// MaxExecAnswerBytes, once the output budget has room for it. It is a
// unary call made as a stream, in steps: the runtime sends its response
// headers with its answer (containerd and CRI-O alike), so a command still
// running holds none of the budget. The caller calls release once it no
// longer holds the answer.
func (r *CRI) execSyncCall(ctx context.Context, req *runtimeapi.ExecSyncRequest) (_ *runtimeapi.ExecSyncResponse, release func(), _ error) {
	cs, err := r.conn.NewStream(ctx, &grpc.StreamDesc{StreamName: "ExecSync"}, runtimeapi.RuntimeService_ExecSync_FullMethodName,
		grpc.MaxCallRecvMsgSize(cri.MaxExecAnswerBytes))
	if err != nil {
		return nil, nil, err
	}
	// io.EOF: the stream has ended, and RecvMsg says why.
	if err := cs.SendMsg(req); err != nil && !errors.Is(err, io.EOF) {
		return nil, nil, err
	}
	if err := cs.CloseSend(); err != nil {
		return nil, nil, err
	}
	// The answer's headers; none when the call failed or ran out of time
	// without an answer, which RecvMsg then reports, reading nothing.
	md, err := cs.Header()
	if err != nil {
		return nil, nil, err
	}
	release = func() {}
	if md != nil {
		if release, err = r.budget.Reserve(ctx, execout.CRIAnswerCost); err != nil {
			// The caller's cancel ends the stream, unread.
			return nil, nil, &cri.OutputBudgetError{Budget: r.budget.Size(), Ran: true}
		}
	}
	resp := &runtimeapi.ExecSyncResponse{}
	if err := cs.RecvMsg(resp); err != nil {
		release()
		return nil, nil, err
	}
	return resp, release, nil
}

// StopContainer calls CRI StopContainer; the runtime sends the stop signal,
// waits the grace period (whole seconds, rounded up) and kills. A stopped
// container is no error there either.
func (r *CRI) StopContainer(ctx context.Context, containerID string, grace time.Duration) error {
	id, err := cri.ParseContainerID(containerID)
	if err != nil {
		return err
	}
	secs := CeilSeconds(grace)
	// The kubelet gives the runtime the grace period plus its 2 minute request timeout.
	callCtx, cancel := context.WithTimeout(ctx, time.Duration(secs)*time.Second+cri.KillWaitTimeout)
	defer cancel()
	if _, err := r.rs.StopContainer(callCtx, &runtimeapi.StopContainerRequest{ContainerId: id.ID, Timeout: secs}); err != nil {
		if ctx.Err() != nil {
			return fmt.Errorf("stop container %s: %w", containerID, ctx.Err())
		}
		return fmt.Errorf("stop container %s: %w", containerID, r.classify(ctx, id.ID, err))
	}
	return nil
}

// classify asks for the container's status to tell "not found" and "not
// running" apart from other failures; runtimes word those errors differently.
func (r *CRI) classify(ctx context.Context, id string, err error) error {
	switch status.Code(err) {
	case codes.NotFound:
		return fmt.Errorf("%w (%v)", cri.ErrContainerNotFound, err)
	case codes.ResourceExhausted:
		if strings.Contains(status.Convert(err).Message(), "received message larger than max") {
			return fmt.Errorf("output too large: stdout and stderr together exceed the %d MiB probed reads of an exec's answer (the kubelet reads 16 MiB): %w", cri.MaxExecAnswerBytes>>20, err)
		}
		return fmt.Errorf("output too large for the runtime's response size limit: %w", err)
	}
	sctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	resp, serr := r.rs.ContainerStatus(sctx, &runtimeapi.ContainerStatusRequest{ContainerId: id})
	switch {
	case status.Code(serr) == codes.NotFound:
		return fmt.Errorf("%w (%v)", cri.ErrContainerNotFound, err)
	case serr == nil && resp.GetStatus().GetState() != runtimeapi.ContainerState_CONTAINER_RUNNING:
		return fmt.Errorf("%w: state %s (%v)", cri.ErrContainerNotRunning, resp.GetStatus().GetState(), err)
	}
	return err
}

// CeilSeconds converts to CRI's whole seconds, rounding up so that a positive
// timeout never becomes 0, which CRI reads as "no timeout".
func CeilSeconds(d time.Duration) int64 {
	if d <= 0 {
		return 0
	}
	return int64((d + time.Second - 1) / time.Second)
}
