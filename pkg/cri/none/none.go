// Package none is the runtime of a node with no runtime client
// (--runtime-type=none): every exec and stop is refused.
package none

import (
	"context"
	"errors"
	"time"

	"github.com/probed-dev/probed/pkg/cri"
)

// ErrNoRuntime is what exec probes and kills get when no runtime is configured.
var ErrNoRuntime = errors.New("no container runtime configured (--runtime-type=none)")

type none struct{}

// None returns a Runtime that refuses execs and stops, and is always ready.
func None() cri.Runtime { return none{} }

func (none) ExecInContainer(context.Context, string, []string, time.Duration) ([]byte, int, error) {
	return nil, 0, ErrNoRuntime
}

func (none) StopContainer(context.Context, string, time.Duration) error { return ErrNoRuntime }
func (none) Ready(context.Context) error                                { return nil }
func (none) Close() error                                               { return nil }

// Name labels the runtime metrics.
func (none) Name() string { return cri.TypeNone }
