package prober

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"

	"github.com/probed-dev/probed/pkg/probespec"
)

func TestExecProbe(t *testing.T) {
	big := strings.Repeat("y", MaxOutputBytes+500)
	otherErr := errors.New("rpc error: code = NotFound desc = container not found")
	cases := []struct {
		name       string
		output     string
		exitCode   int
		err        error
		wantResult Result
		wantOutput string
		wantErr    error
	}{
		{name: "exit 0", output: "all good", wantResult: Success, wantOutput: "all good"},
		{name: "exit 1", output: "not ready", exitCode: 1, wantResult: Failure, wantOutput: "not ready"},
		{name: "exit 127", output: "sh: nope: not found", exitCode: 127, wantResult: Failure, wantOutput: "sh: nope: not found"},
		{name: "timeout", err: timeoutError{}, wantResult: Failure,
			wantOutput: `command timed out: "sh -c sleep $(SECS) && echo 5" timed out after 2s`},
		{name: "wrapped timeout", err: fmt.Errorf("exec: %w", context.DeadlineExceeded), wantResult: Failure,
			wantOutput: `command timed out: "sh -c sleep $(SECS) && echo 5" timed out after 2s`},
		{name: "other error", output: "partial", err: otherErr, wantResult: Unknown, wantErr: otherErr},
		{name: "output capped on success", output: big, wantResult: Success, wantOutput: big[:MaxOutputBytes]},
		{name: "output capped on failure", output: big, exitCode: 2, wantResult: Failure, wantOutput: big[:MaxOutputBytes]},
	}
	action := &v1.ExecAction{Command: []string{"sh", "-c", "sleep $(SECS) && echo $(N)"}}
	target := Target{ContainerID: "containerd://abc", Env: []v1.EnvVar{{Name: "N", Value: "5"}}}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var gotID string
			var gotTimeout time.Duration
			r := runnerFunc(func(_ context.Context, id string, cmd []string, timeout time.Duration) ([]byte, int, error) {
				gotID, gotTimeout = id, timeout
				want := []string{"sh", "-c", "sleep $(SECS) && echo 5"}
				if !reflect.DeepEqual(cmd, want) {
					t.Errorf("cmd = %q; want %q", cmd, want)
				}
				return []byte(tc.output), tc.exitCode, tc.err
			})
			res, out, err := execProbe(context.Background(), r, action, target, 2*time.Second)
			if !errors.Is(err, tc.wantErr) || (tc.wantErr == nil && err != nil) {
				t.Fatalf("err = %v; want %v", err, tc.wantErr)
			}
			if res != tc.wantResult || out != tc.wantOutput {
				t.Errorf("probe = %v, %q; want %v, %q", res, out, tc.wantResult, tc.wantOutput)
			}
			if gotID != "containerd://abc" || gotTimeout != 2*time.Second {
				t.Errorf("runner got id %q timeout %v", gotID, gotTimeout)
			}
		})
	}
}

func TestExecProbeWithoutRunner(t *testing.T) {
	res, _, err := execProbe(context.Background(), nil, &v1.ExecAction{Command: []string{"true"}}, Target{}, time.Second)
	if res != Unknown || !errors.Is(err, errNoRunner) {
		t.Errorf("probe = %v, %v; want Unknown, errNoRunner", res, err)
	}
}

// runnerFunc adapts a function to CommandRunner.
type runnerFunc func(ctx context.Context, containerID string, cmd []string, timeout time.Duration) ([]byte, int, error)

func (f runnerFunc) ExecInContainer(ctx context.Context, containerID string, cmd []string, timeout time.Duration) ([]byte, int, error) {
	return f(ctx, containerID, cmd, timeout)
}

// ownerMismatch is the runtime's refusal of another pod's container.
type ownerMismatch struct{}

func (ownerMismatch) Error() string       { return "container ID from the pod's status is not this pod's" }
func (ownerMismatch) OwnerMismatch() bool { return true }

// A container the runtime refused as another pod's is refused again on a
// retry: the probe is tried once, errors, and says so in one event.
func TestExecProbeOwnerMismatchNotRetried(t *testing.T) {
	calls := 0
	p := New(runnerFunc(func(context.Context, string, []string, time.Duration) ([]byte, int, error) {
		calls++
		return nil, -1, ownerMismatch{}
	}), Options{})
	sink := &recordingSink{}
	_, _, err := p.Probe(context.Background(), probespec.Liveness, &v1.Probe{ProbeHandler: v1.ProbeHandler{Exec: &v1.ExecAction{Command: []string{"true"}}}, TimeoutSeconds: 1},
		Target{ContainerID: "containerd://other"}, sink)
	if !errors.As(err, new(ownerMismatch)) || calls != 1 {
		t.Errorf("err %v after %d runs; want the refusal after one", err, calls)
	}
}
