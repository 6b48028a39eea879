package worker

import (
	"context"
	"slices"
	"sync"
	"testing"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/probed-dev/probed/pkg/probespec"
	"github.com/probed-dev/probed/pkg/results"
)

type sandboxIPs map[string][]string

func (s sandboxIPs) SandboxIPs(_ context.Context, id string) ([]string, error) {
	return s[id], nil
}

type livenessLog struct {
	mu     sync.Mutex
	passed []string
}

func (l *livenessLog) LivenessPassed(uid types.UID, c string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.passed = append(l.passed, string(uid)+"/"+c)
}

func (l *livenessLog) ForgetPod(types.UID) {}

// The worker itself hands the prober only the IPs the node vouches for,
// marked verified; without OwnIPs they go as written, unverified.
func TestWorkerNarrowsPodIPs(t *testing.T) {
	for name, own := range map[string]*OwnIPs{
		"sandbox": {Sandbox: sandboxIPs{testID: {"10.1.0.5"}}},
		"trust":   {TrustStatus: true},
		"none":    nil,
	} {
		t.Run(name, func(t *testing.T) {
			e, w := newEnv(t, probespec.Readiness, v1.Probe{}, func(c *Config) { c.OwnIPs = own })
			e.pods.set(runningPod(epoch))
			expectContinue(t, w, "probe")
			e.prober.mu.Lock()
			got := e.prober.target
			e.prober.mu.Unlock()
			want, verified := []string{"10.0.0.7"}, false
			if own != nil && !own.TrustStatus {
				want, verified = []string{"10.1.0.5"}, true
			}
			if !slices.Equal(got.PodIPs, want) || got.PodIPsVerified != verified {
				t.Errorf("target PodIPs %v, verified %v; want %v, %v", got.PodIPs, got.PodIPsVerified, want, verified)
			}
		})
	}
}

// A liveness success reaches the tracker from the worker; a failure, or
// another probe type's success, does not.
func TestWorkerTellsLivenessPassed(t *testing.T) {
	for _, tc := range []struct {
		pt     probespec.ProbeType
		result results.Result
		want   int
	}{
		{probespec.Liveness, results.Success, 1},
		{probespec.Liveness, results.Failure, 0},
		{probespec.Readiness, results.Success, 0},
	} {
		t.Run(tc.pt.String()+"/"+tc.result.String(), func(t *testing.T) {
			l := &livenessLog{}
			e, w := newEnv(t, tc.pt, v1.Probe{}, func(c *Config) { c.Liveness = l })
			e.pods.set(runningPod(epoch))
			e.prober.set(tc.result)
			expectContinue(t, w, "probe")
			l.mu.Lock()
			defer l.mu.Unlock()
			if len(l.passed) != tc.want || (tc.want == 1 && l.passed[0] != string(testUID)+"/"+testContainer) {
				t.Errorf("LivenessPassed calls %v; want %d for this container", l.passed, tc.want)
			}
		})
	}
}
