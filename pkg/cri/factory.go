package cri

import (
	"context"
	"fmt"

	versionapi "github.com/containerd/containerd/api/services/version/v1"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/emptypb"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"k8s.io/klog/v2"
)

// maxMsgSize matches the kubelet's CRI client and containerd's own limit;
// the runtime's own answers (statuses, specs) may be that large. ExecSync,
// whose answer a tenant's command writes, reads at most MaxExecAnswerBytes.
const maxMsgSize = 16 << 20

// streamWindow is each call's HTTP/2 flow-control window on the runtime
// connection: what the runtime may send of an answer probed has not read
// yet. Fixed (no BDP growth, which goes up to 16 MiB), so an ExecSync
// answer waiting for the output budget holds no more than this.
const streamWindow = 64 << 10

// connWindow is the connection's: it is refilled as data arrives, so it
// holds nothing back but the calls' throughput.
const connWindow = 1 << 20

// New returns the Runtime that Options select.
//
// With Type "auto", New asks the endpoint for containerd's version service,
// then for CRI's. containerd with its CRI plugin gets containerd-cri: execs
// through CRI, as the kubelet runs them (the cheapest path, measured), with
// the native client killing a timed-out probe's whole process tree and
// honouring sub-second timeouts. containerd without CRI gets the native
// client, which also streams output into a 10 KiB buffer instead of having
// containerd hold up to 16 MiB per stream. Anything else (CRI-O) gets CRI,
// which needs nothing but the socket.
//
// The explicit types connect lazily and do not fail when the runtime is
// down; Ready reports that. "auto" must reach the runtime to decide.
func New(ctx context.Context, o Options) (Runtime, error) {
	if err := o.complete(); err != nil {
		return nil, err
	}
	conn, err := dial(o.Endpoint)
	if err != nil {
		return nil, err
	}
	typ := o.Type
	if typ == TypeAuto {
		if typ, err = detect(ctx, conn, o); err != nil {
			_ = conn.Close()
			return nil, err
		}
	}
	klog.FromContext(ctx).Info("Container runtime client", "type", typ, "endpoint", o.Endpoint, "requested", o.Type)
	budget := newOutputBudget(o.OutputBudget)
	switch typ {
	case TypeNative:
		return newContainerd(conn, o, budget)
	case TypeContainerdCRI:
		return newContainerdCRI(conn, o, budget)
	}
	return newCRI(conn, budget), nil
}

func dial(endpoint string) (*grpc.ClientConn, error) {
	conn, err := grpc.NewClient(endpoint,
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithInitialWindowSize(streamWindow), grpc.WithInitialConnWindowSize(connWindow),
		grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(maxMsgSize), grpc.MaxCallSendMsgSize(maxMsgSize)))
	if err != nil {
		return nil, fmt.Errorf("runtime endpoint %s: %w", endpoint, err)
	}
	return conn, nil
}

// detect tells containerd, with or without CRI, from a CRI-only runtime by
// their version services.
func detect(ctx context.Context, conn *grpc.ClientConn, o Options) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, o.DetectTimeout)
	defer cancel()
	// WaitForReady: a runtime that is still starting gets the whole DetectTimeout.
	_, err := versionapi.NewVersionClient(conn).Version(ctx, &emptypb.Empty{}, grpc.WaitForReady(true))
	switch status.Code(err) {
	case codes.OK:
	case codes.Unimplemented:
		return TypeCRI, nil
	default:
		return "", fmt.Errorf("detect runtime at %s: %w", o.Endpoint, err)
	}
	_, err = runtimeapi.NewRuntimeServiceClient(conn).Version(ctx, &runtimeapi.VersionRequest{})
	switch status.Code(err) {
	case codes.OK:
		return TypeContainerdCRI, nil
	case codes.Unimplemented:
		return TypeNative, nil
	}
	return "", fmt.Errorf("detect runtime at %s: containerd answers, its CRI service: %w", o.Endpoint, err)
}
