//go:build runtime

package runtimetest

import (
	"context"
	"errors"
	"testing"
	"time"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/probed-dev/probed/pkg/cri"
	ctrd "github.com/probed-dev/probed/test/harness/containerd"
)

// TestExecAfterContainerGoes: the native client keeps a container's task
// and spec between execs; once the container stops, and once it is removed,
// an exec must say so exactly as a first exec would.
func TestExecAfterContainerGoes(t *testing.T) {
	h := need(t)
	forEachImpl(t, func(t *testing.T, rt cri.Runtime) {
		c := newContainer(t, ctrd.ContainerSpec{Command: idleCommand})
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		for range 2 {
			if _, code, err := rt.ExecInContainer(ctx, c.RuntimeID(), []string{"true"}, 5*time.Second); err != nil || code != 0 {
				t.Fatalf("exec = %d, %v", code, err)
			}
		}
		if _, err := h.CRI().StopContainer(ctx, stopRequest(c.ID, 0)); err != nil {
			t.Fatal(err)
		}
		if _, _, err := rt.ExecInContainer(ctx, c.RuntimeID(), []string{"true"}, 5*time.Second); !errors.Is(err, cri.ErrContainerNotRunning) {
			t.Fatalf("stopped: got %v, want %v", err, cri.ErrContainerNotRunning)
		}
		if _, err := h.CRI().RemoveContainer(ctx, &runtimeapi.RemoveContainerRequest{ContainerId: c.ID}); err != nil {
			t.Fatal(err)
		}
		if _, _, err := rt.ExecInContainer(ctx, c.RuntimeID(), []string{"true"}, 5*time.Second); !errors.Is(err, cri.ErrContainerNotFound) {
			t.Fatalf("removed: got %v, want %v", err, cri.ErrContainerNotFound)
		}

		// Removed right after a successful exec, with no failed one between.
		c2 := newContainer(t, ctrd.ContainerSpec{Command: idleCommand})
		if _, code, err := rt.ExecInContainer(ctx, c2.RuntimeID(), []string{"true"}, 5*time.Second); err != nil || code != 0 {
			t.Fatalf("exec = %d, %v", code, err)
		}
		if _, err := h.CRI().StopContainer(ctx, stopRequest(c2.ID, 0)); err != nil {
			t.Fatal(err)
		}
		if _, err := h.CRI().RemoveContainer(ctx, &runtimeapi.RemoveContainerRequest{ContainerId: c2.ID}); err != nil {
			t.Fatal(err)
		}
		if _, _, err := rt.ExecInContainer(ctx, c2.RuntimeID(), []string{"true"}, 5*time.Second); !errors.Is(err, cri.ErrContainerNotFound) {
			t.Fatalf("removed after an exec: got %v, want %v", err, cri.ErrContainerNotFound)
		}
	})
}
