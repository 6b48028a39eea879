//go:build runtime

package runtimetest

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/probed-dev/probed/pkg/cri"
	"github.com/probed-dev/probed/pkg/cri/connect"
	ctrd "github.com/probed-dev/probed/test/harness/containerd"
)

// TestAutoPicksContainerdCRIOnContainerd: containerd answers its own API and
// CRI, so "auto" takes containerd-cri; a cri-o:// ID is then refused clearly.
func TestAutoPicksContainerdCRIOnContainerd(t *testing.T) {
	h := need(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	rt, err := connect.New(ctx, cri.Options{Endpoint: h.Endpoint(), FIFODir: h.FIFODir()})
	if err != nil {
		t.Fatal(err)
	}
	defer rt.Close()
	if got := cri.RuntimeName(rt); got != cri.TypeContainerdCRI {
		t.Fatalf("auto picked %q on containerd", got)
	}
	c := newContainer(t, ctrd.ContainerSpec{Command: idleCommand})
	if _, code, err := rt.ExecInContainer(ctx, c.RuntimeID(), []string{"true"}, 5*time.Second); err != nil || code != 0 {
		t.Fatalf("exec: %d %v", code, err)
	}
	_, _, err = rt.ExecInContainer(ctx, "cri-o://"+c.ID, []string{"true"}, 5*time.Second)
	if !errors.Is(err, cri.ErrUnsupportedRuntime) {
		t.Fatalf("cri-o ID on containerd-cri: %v", err)
	}
}
