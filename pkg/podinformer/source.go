package podinformer

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	podsv1alpha1 "k8s.io/kubelet/pkg/apis/pods/v1alpha1"
)

// Source is where probed reads its node's pods.
type Source string

const (
	// SourceAuto is the kubelet where its Pods API answers at start, the
	// API server otherwise.
	SourceAuto Source = "auto"
	// SourceAPIServer is a watch of the API server (spec.nodeName=<node>).
	SourceAPIServer Source = "apiserver"
	// SourceKubelet is the kubelet's Pods API (KEP-4188).
	SourceKubelet Source = "kubelet"
)

// Sources are the values --pod-source takes.
var Sources = []Source{SourceAuto, SourceAPIServer, SourceKubelet}

// Choose resolves auto: the kubelet when its Pods API at socket answers,
// or says it is still syncing, within wait; the API server when there is
// no socket, the kubelet does not serve the API, or nothing answers by
// then. It returns the source and why, for the start-up log line.
func Choose(ctx context.Context, want Source, socket string, wait time.Duration) (Source, string) {
	switch want {
	case SourceAPIServer:
		return SourceAPIServer, "--pod-source=apiserver"
	case SourceKubelet:
		return SourceKubelet, "--pod-source=kubelet"
	}
	if _, err := os.Stat(socket); errors.Is(err, fs.ErrNotExist) {
		return SourceAPIServer, fmt.Sprintf("no Pods API socket at %s (a kubelet before 1.36 or with the PodsAPI gate off, or its directory not mounted)", socket)
	} else if err != nil {
		return SourceAPIServer, fmt.Sprintf("the Pods API socket at %s: %v", socket, err)
	}
	conn, err := DialKubelet(socket)
	if err != nil {
		return SourceAPIServer, fmt.Sprintf("the Pods API socket at %s: %v", socket, err)
	}
	defer conn.Close()
	client := podsv1alpha1.NewPodsClient(conn)
	deadline := time.Now().Add(wait)
	for {
		err := ask(ctx, client)
		switch status.Code(err) {
		case codes.OK:
			return SourceKubelet, "the kubelet serves its Pods API at " + socket
		case codes.FailedPrecondition:
			return SourceKubelet, "the kubelet serves its Pods API at " + socket + " (its pod sources are still syncing)"
		case codes.Unimplemented:
			return SourceAPIServer, "the kubelet at " + socket + " does not serve the Pods API"
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return SourceAPIServer, fmt.Sprintf("the Pods API at %s did not answer within %v: %v", socket, wait, err)
		}
		select {
		case <-ctx.Done():
		case <-time.After(time.Second):
		}
	}
}

// ask opens a watch and reads its first event.
func ask(ctx context.Context, client podsv1alpha1.PodsClient) error {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	s, err := client.WatchPods(ctx, &podsv1alpha1.WatchPodsRequest{})
	if err != nil {
		return err
	}
	_, err = s.Recv()
	return err
}

// grpcCode names err's gRPC code for the errors metric.
func grpcCode(err error) string {
	if errors.Is(err, context.Canceled) {
		return codes.Canceled.String()
	}
	return status.Code(err).String()
}

// explain says what a code from the Pods API means for probed.
func explain(code string) string {
	switch code {
	case codes.FailedPrecondition.String():
		return "the kubelet's pod sources have not synced yet (it has just started)"
	case codes.ResourceExhausted.String():
		return "the kubelet ended probed's watch: it is shutting down (a restart), or probed fell behind"
	case codes.Unavailable.String():
		return "no kubelet answers on the socket (restarting?)"
	case codes.Unimplemented.String():
		return "the kubelet does not serve the Pods API (the PodsAPI feature gate is off)"
	case codes.PermissionDenied.String():
		return "probed may not use the socket"
	}
	return "unexpected"
}
