package containerd

import (
	"context"
	"encoding/json"
	"fmt"
	"syscall"
	"time"

	containerd "github.com/containerd/containerd/v2/client"
	"github.com/containerd/errdefs"
	"github.com/moby/sys/signal"
	"github.com/probed-dev/probed/pkg/cri"
	"k8s.io/klog/v2"
)

// criMetadataExtension is where containerd's CRI plugin (1.6 to 2.x) keeps a
// container's metadata, including the image's stop signal.
const criMetadataExtension = "io.cri-containerd.container.metadata"

// StopContainer sends the container's stop signal, waits up to grace for the
// task to exit, then sends SIGKILL and waits for the exit. With grace <= 0 it
// sends SIGKILL at once, as CRI does. A container without a running task is
// already stopped: that is not an error. The task is not deleted: the CRI
// plugin does that when it sees the exit, and the kubelet restarts the container.
func (r *Containerd) StopContainer(ctx context.Context, containerID string, grace time.Duration) error {
	id, err := r.parseID(containerID)
	if err != nil {
		return err
	}
	ctx = r.withNamespace(ctx)
	logger := klog.FromContext(ctx)
	c, err := r.client.LoadContainer(ctx, id)
	if err != nil {
		if errdefs.IsNotFound(err) {
			return fmt.Errorf("stop container %s: %w", containerID, cri.ErrContainerNotFound)
		}
		return fmt.Errorf("stop container %s: %w", containerID, err)
	}
	task, err := c.Task(ctx, nil)
	if errdefs.IsNotFound(err) {
		return nil
	} else if err != nil {
		return fmt.Errorf("stop container %s: load task: %w", containerID, err)
	}
	waitCtx, stopWait := context.WithCancel(ctx)
	defer stopWait()
	exitCh, err := task.Wait(waitCtx) // before any signal, so the exit cannot be missed
	if errdefs.IsNotFound(err) {
		return nil
	} else if err != nil {
		return fmt.Errorf("stop container %s: wait: %w", containerID, err)
	}

	if grace > 0 {
		sig := r.stopSignal(ctx, c)
		logger.V(2).Info("Stopping container", "containerID", containerID, "signal", sig, "grace", grace)
		if err := task.Kill(ctx, sig); err != nil && !errdefs.IsNotFound(err) {
			return fmt.Errorf("stop container %s: send %v: %w", containerID, sig, err)
		}
		timer := time.NewTimer(grace)
		defer timer.Stop()
		select {
		case <-exitCh:
			return nil
		case <-ctx.Done():
			return fmt.Errorf("stop container %s: %w", containerID, ctx.Err())
		case <-timer.C:
		}
	}

	logger.V(2).Info("Killing container", "containerID", containerID)
	if err := task.Kill(ctx, syscall.SIGKILL); err != nil && !errdefs.IsNotFound(err) {
		return fmt.Errorf("stop container %s: send SIGKILL: %w", containerID, err)
	}
	killTimer := time.NewTimer(cri.KillWaitTimeout)
	defer killTimer.Stop()
	select {
	case <-exitCh:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("stop container %s: waiting for exit after SIGKILL: %w", containerID, ctx.Err())
	case <-killTimer.C:
		return fmt.Errorf("stop container %s: still running %v after SIGKILL", containerID, cri.KillWaitTimeout)
	}
}

// stopSignal finds the container's stop signal where containerd keeps it:
// the stop-signal label (ctr, nerdctl), the CRI plugin's metadata (copied from
// the image at create time), the image config; SIGTERM when none says.
func (r *Containerd) stopSignal(ctx context.Context, c containerd.Container) syscall.Signal {
	logger := klog.FromContext(ctx)
	name := ""
	if info, err := c.Info(ctx, containerd.WithoutRefreshedMetadata); err == nil {
		name = info.Labels[containerd.StopSignalLabel]
		if ext, ok := info.Extensions[criMetadataExtension]; name == "" && ok && ext != nil {
			var meta struct{ Metadata struct{ StopSignal string } }
			if err := json.Unmarshal(ext.GetValue(), &meta); err == nil {
				name = meta.Metadata.StopSignal
			}
		}
	}
	if name == "" {
		if img, err := c.Image(ctx); err == nil {
			name, _ = containerd.GetOCIStopSignal(ctx, img, "SIGTERM")
		}
	}
	if name == "" {
		return syscall.SIGTERM
	}
	sig, err := signal.ParseSignal(name)
	if err != nil {
		logger.Info("Warning: unparsable stop signal, using SIGTERM", "container", c.ID(), "signal", name)
		return syscall.SIGTERM
	}
	return sig
}
