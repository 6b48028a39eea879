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
	"k8s.io/klog/v2"
)

// maxMsgSize matches the kubelet's CRI client and containerd's own limit, so an
// exec whose output the kubelet would accept is accepted here too.
const maxMsgSize = 16 << 20

// New returns the Runtime that Options select.
//
// With Type "auto", New asks the endpoint for containerd's version service:
// if it answers, the native client is used, otherwise CRI (CRI-O, or anything
// else that speaks only CRI). Native is preferred on containerd because it
// can kill a timed-out probe's whole process tree, streams output into a
// 10 KiB buffer instead of having containerd hold up to 16 MiB per stream,
// honours sub-second timeouts and does not hang on a child that keeps the
// output pipe open. CRI needs nothing but the socket.
//
// "containerd" and "cri" connect lazily and do not fail when the runtime is
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
	if typ == TypeNative {
		return newContainerd(conn, o)
	}
	return newCRI(conn), nil
}

func dial(endpoint string) (*grpc.ClientConn, error) {
	conn, err := grpc.NewClient(endpoint,
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(maxMsgSize), grpc.MaxCallSendMsgSize(maxMsgSize)))
	if err != nil {
		return nil, fmt.Errorf("runtime endpoint %s: %w", endpoint, err)
	}
	return conn, nil
}

// detect tells containerd from a CRI-only runtime by its version service.
func detect(ctx context.Context, conn *grpc.ClientConn, o Options) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, o.DetectTimeout)
	defer cancel()
	// WaitForReady: a runtime that is still starting gets the whole DetectTimeout.
	_, err := versionapi.NewVersionClient(conn).Version(ctx, &emptypb.Empty{}, grpc.WaitForReady(true))
	switch status.Code(err) {
	case codes.OK:
		return TypeNative, nil
	case codes.Unimplemented:
		return TypeCRI, nil
	}
	return "", fmt.Errorf("detect runtime at %s: %w", o.Endpoint, err)
}
