package lifecycle

import (
	"context"
	"errors"
	"fmt"
	"strings"
)

// errNoRuntime: probed runs without a container runtime (--runtime-type=none).
var errNoRuntime = errors.New("no container runtime to run the hook in")

// runExec runs cmd in the container with no timeout of its own, as the
// kubelet does (RunInContainer with timeout 0): it ends when the command
// does, or when ctx ends. The output is stdout and stderr combined (at most
// 10 KiB). A non-zero exit is an error in the CRI client's words.
func (r *Runner) runExec(ctx context.Context, containerID string, cmd []string) ([]byte, error) {
	if r.exec == nil {
		return nil, errNoRuntime
	}
	output, code, err := r.exec.ExecInContainer(ctx, containerID, cmd, 0)
	if err != nil {
		return output, err
	}
	if code != 0 {
		// The kubelet quotes stderr alone; probed's runtime gives the two
		// streams combined.
		return output, fmt.Errorf("command '%s' exited with %d: %s", strings.Join(cmd, " "), code, output)
	}
	return output, nil
}
