// Package connect opens the runtime client that Options select: containerd
// native, containerd-cri, CRI, or auto-detected.
package connect

import (
	"context"
	"fmt"

	versionapi "github.com/containerd/containerd/api/services/version/v1"
	"github.com/probed-dev/probed/pkg/cri"
	"github.com/probed-dev/probed/pkg/cri/containerd"
	"github.com/probed-dev/probed/pkg/cri/internal/dial"
	"github.com/probed-dev/probed/pkg/cri/internal/execout"
	"github.com/probed-dev/probed/pkg/cri/runtimeservice"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/emptypb"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"k8s.io/klog/v2"
)

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
func New(ctx context.Context, o cri.Options) (cri.Runtime, error) {
	if err := o.Complete(); err != nil {
		return nil, err
	}
	conn, err := dial.Dial(o.Endpoint)
	if err != nil {
		return nil, err
	}
	typ := o.Type
	if typ == cri.TypeAuto {
		if typ, err = detect(ctx, conn, o); err != nil {
			_ = conn.Close()
			return nil, err
		}
	}
	klog.FromContext(ctx).Info("Container runtime client", "type", typ, "endpoint", o.Endpoint, "requested", o.Type)
	budget := execout.NewBudget(o.OutputBudget)
	switch typ {
	case cri.TypeNative:
		return containerd.New(conn, o, budget)
	case cri.TypeContainerdCRI:
		return containerd.NewContainerdCRI(conn, o, budget)
	}
	return runtimeservice.New(conn, budget), nil
}

// detect tells containerd, with or without CRI, from a CRI-only runtime by
// their version services.
func detect(ctx context.Context, conn *grpc.ClientConn, o cri.Options) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, o.DetectTimeout)
	defer cancel()
	// WaitForReady: a runtime that is still starting gets the whole DetectTimeout.
	_, err := versionapi.NewVersionClient(conn).Version(ctx, &emptypb.Empty{}, grpc.WaitForReady(true))
	switch status.Code(err) {
	case codes.OK:
	case codes.Unimplemented:
		return cri.TypeCRI, nil
	default:
		return "", fmt.Errorf("detect runtime at %s: %w", o.Endpoint, err)
	}
	_, err = runtimeapi.NewRuntimeServiceClient(conn).Version(ctx, &runtimeapi.VersionRequest{})
	switch status.Code(err) {
	case codes.OK:
		return cri.TypeContainerdCRI, nil
	case codes.Unimplemented:
		return cri.TypeNative, nil
	}
	return "", fmt.Errorf("detect runtime at %s: containerd answers, its CRI service: %w", o.Endpoint, err)
}
