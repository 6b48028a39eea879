//go:build integration

package integration

import (
	"strings"
	"testing"
	"time"
)

// TestFaultAPIServerRestarts restarts the API server five times, a few
// seconds apart, while readiness targets flip and the liveness container is
// restarted after every kill. Afterwards every pod's conditions match its
// target, every container instance was killed exactly once, and probed never
// exited. Not parallel: it stops the shared API server.
func TestFaultAPIServerRestarts(t *testing.T) {
	r := newFaultRig(t, "conditions")
	r.start("")
	// Never leave the shared API server down for the tests after this one.
	t.Cleanup(func() { _ = cp.StartAPIServer(r.e.ctx) })
	stopKubelet := r.runKubelet()
	for i := 0; i < 5; i++ {
		r.flip()
		if err := cp.StopAPIServer(); err != nil {
			t.Fatal(err)
		}
		time.Sleep(2 * time.Second) // pace the fault: down for a while
		r.flip()
		start := time.Now()
		startAPIServerRetrying(t)
		t.Logf("restart %d: API server ready %v after its start", i+1, time.Since(start).Round(time.Millisecond))
		time.Sleep(2 * time.Second) // pace the fault: up for a while
	}
	r.flip()
	// The last flip is the final health; the fault ended with the last start.
	ended := time.Now()
	stopKubelet()
	r.converged("apiserver-restarts", ended)
	r.checkKills("apiserver-restarts", ended)
	r.checkHealthy("apiserver-restarts")
}

// startAPIServerRetrying starts the API server again on its port. On a shared
// machine another process may hold that port for a moment while the server
// is down (an outgoing connection's ephemeral port), so that is retried.
func startAPIServerRetrying(t *testing.T) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		err := cp.StartAPIServer(t.Context())
		if err == nil {
			return
		}
		if !strings.Contains(err.Error(), "port already in use") || time.Now().After(deadline) {
			t.Fatal(err)
		}
		t.Logf("API server port busy; retrying its start")
		time.Sleep(time.Second) // pace the retries
	}
}
