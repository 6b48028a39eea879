package decorator

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/probed-dev/probed/pkg/cri"
	"k8s.io/utils/clock"
)

// sharedRuns lets identical execs share one run (--exec-share-runs). A
// container whose liveness and readiness probes run the same command, and
// fire while the other's run is still going, then costs one exec instead of
// two; the kubelet would run both.
//
// What it promises:
//   - Only a run already executing (holding an exec slot) is joined; a queued
//     one is not, so the exec cap's wait never becomes anyone's timeout.
//   - A caller joins only a run whose timeout is at least its own, and only
//     while the run has been going for less than its own timeout: the shared
//     run is bounded by the longest timeout among those who share it.
//   - Each caller's verdict is what the run would have given it alone: the
//     run's output and exit code if the command finished within the caller's
//     timeout, a *TimeoutError otherwise. A joiner never waits longer than
//     its own timeout counted from the run's start.
//   - A run cut short by its leader's context (the leader's worker stopped)
//     is not anyone else's answer: the joiners run the command themselves.
type sharedRuns struct {
	clock clock.Clock
	mu    sync.Mutex
	runs  map[string]*sharedRun // executing runs by container and command
}

// sharedRun is one exec in flight that others may join.
type sharedRun struct {
	start   time.Time
	timeout time.Duration // <= 0: none
	done    chan struct{}
	// Set before done is closed.
	out       []byte
	code      int
	err       error
	took      time.Duration
	abandoned bool // the leader's context ended it
}

func newSharedRuns(c clock.Clock) *sharedRuns {
	return &sharedRuns{clock: c, runs: map[string]*sharedRun{}}
}

// runKey names a command in a container. Arguments cannot hold NUL bytes
// (execve takes C strings), so NUL separates them unambiguously.
func runKey(containerID string, cmd []string) string {
	return containerID + "\x00" + strings.Join(cmd, "\x00")
}

// joinable returns the executing run for key that a caller with timeout may
// join, or nil.
func (s *sharedRuns) joinable(key string, timeout time.Duration) *sharedRun {
	s.mu.Lock()
	defer s.mu.Unlock()
	r := s.runs[key]
	if r == nil || !covers(r.timeout, timeout) {
		return nil
	}
	if timeout > 0 && s.clock.Since(r.start) >= timeout {
		// Already longer than this caller would wait: its own run may well
		// be quicker.
		return nil
	}
	return r
}

// covers reports whether a run with timeout run lasts at least as long as a
// caller with timeout t would wait (<= 0 is no timeout).
func covers(run, t time.Duration) bool {
	if run <= 0 {
		return true
	}
	return t > 0 && t <= run
}

// begin registers the run a leader is about to execute. Of two runs of the
// same command, the one that ends later stays joinable.
func (s *sharedRuns) begin(key string, timeout time.Duration) *sharedRun {
	r := &sharedRun{start: s.clock.Now(), timeout: timeout, done: make(chan struct{})}
	s.mu.Lock()
	if old := s.runs[key]; old == nil || endsBefore(old, r) {
		s.runs[key] = r
	}
	s.mu.Unlock()
	return r
}

// endsBefore reports whether a's timeout runs out before b's.
func endsBefore(a, b *sharedRun) bool {
	switch {
	case a.timeout <= 0:
		return false
	case b.timeout <= 0:
		return true
	}
	return a.start.Add(a.timeout).Before(b.start.Add(b.timeout))
}

// finish records the leader's result and wakes the joiners.
func (s *sharedRuns) finish(ctx context.Context, key string, r *sharedRun, out []byte, code int, err error) {
	r.out, r.code, r.err = out, code, err
	r.took = s.clock.Since(r.start)
	r.abandoned = err != nil && ctx.Err() != nil && !cri.IsTimeout(err)
	s.mu.Lock()
	if s.runs[key] == r {
		delete(s.runs, key)
	}
	s.mu.Unlock()
	close(r.done)
}

// wait is a joiner's side: the run's result as the caller would have had it
// alone, ok false if the run was abandoned and the caller must run it
// itself.
func (s *sharedRuns) wait(ctx context.Context, r *sharedRun, containerID string, timeout time.Duration) (out []byte, code int, err error, ok bool) {
	var expired <-chan time.Time
	if timeout > 0 {
		t := s.clock.NewTimer(timeout - s.clock.Since(r.start))
		defer t.Stop()
		expired = t.C()
	}
	select {
	case <-r.done:
	case <-expired:
		return nil, -1, &cri.TimeoutError{ContainerID: containerID, After: timeout}, true
	case <-ctx.Done():
		return nil, -1, fmt.Errorf("exec in container %s: waiting for a shared run: %w", containerID, ctx.Err()), true
	}
	switch {
	case r.abandoned:
		return nil, 0, nil, false
	case r.err == nil && timeout > 0 && r.took > timeout:
		return nil, -1, &cri.TimeoutError{ContainerID: containerID, After: timeout}, true
	case cri.IsTimeout(r.err):
		return nil, -1, &cri.TimeoutError{ContainerID: containerID, After: timeout}, true
	}
	return r.out, r.code, r.err, true
}
