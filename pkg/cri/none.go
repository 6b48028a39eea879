package cri

import (
	"context"
	"errors"
	"time"
)

// TypeNone runs no runtime client: for nodes that only have network probes
// (virtual nodes, or an integration test with no containerd).
const TypeNone = "none"

// ErrNoRuntime is what exec probes and kills get when no runtime is configured.
var ErrNoRuntime = errors.New("no container runtime configured (--runtime-type=none)")

type none struct{}

// None returns a Runtime that refuses execs and stops, and is always ready.
func None() Runtime { return none{} }

func (none) ExecInContainer(context.Context, string, []string, time.Duration) ([]byte, int, error) {
	return nil, 0, ErrNoRuntime
}

func (none) StopContainer(context.Context, string, time.Duration) error { return ErrNoRuntime }
func (none) Ready(context.Context) error                                { return nil }
func (none) Close() error                                               { return nil }

// Name labels the runtime metrics.
func (none) Name() string { return TypeNone }
