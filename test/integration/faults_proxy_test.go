//go:build integration

package integration

import (
	"net/http"
	"testing"
	"time"

	"github.com/probed-dev/probed/test/harness/faultproxy"
)

// The faults of this file come from a proxy on loopback between probed and
// the API server (test/harness/faultproxy); the test itself talks to the API
// server directly. Each test flips targets during the fault and restarts the
// liveness container after every kill, then checks convergence, one kill per
// container instance, and that probed never exited.

// proxiedRig is a fault rig whose probed reaches the API server only
// through a fault proxy.
func proxiedRig(t *testing.T, mode string) (*faultRig, *faultproxy.Proxy) {
	t.Helper()
	r := newFaultRig(t, mode)
	px := startFaultProxy(t)
	r.start(r.proxyKubeconfig(px))
	return r, px
}

// TestFaultWatchCuts cuts every open watch stream each second for 15 s,
// alternating a reset stream with a 410 Expired event, so the informer
// re-watches and relists again and again while pods change. client-go backs
// off between attempts, so not every second finds a watch open.
func TestFaultWatchCuts(t *testing.T) {
	t.Parallel()
	r, px := proxiedRig(t, "conditions")
	before := px.Stats()
	stopKubelet := r.runKubelet()
	stopFlips := r.flipEvery(2 * time.Second)
	stopCuts := px.CutWatchesEvery(time.Second, faultproxy.CutReset, faultproxy.CutExpired)
	time.Sleep(15 * time.Second) // the fault's length
	stopCuts()
	stopFlips()
	ended := time.Now()
	stopKubelet()
	r.converged("watch-cuts", ended)
	r.checkKills("watch-cuts", ended)
	after := px.Stats()
	t.Logf("watch cuts: %d streams cut, %d pod lists (relists), %d watches opened",
		after.WatchesCut-before.WatchesCut, after.PodLists-before.PodLists, after.Watches-before.Watches)
	if after.WatchesCut-before.WatchesCut < 3 {
		t.Errorf("only %d watch streams cut", after.WatchesCut-before.WatchesCut)
	}
	if after.PodLists-before.PodLists < 2 {
		t.Errorf("the informer relisted %d times; the Expired cuts should make it relist", after.PodLists-before.PodLists)
	}
	r.checkHealthy("watch-cuts")
}

// TestFaultThrottled429 answers half of all requests (reads, watches, status
// writes, events) with 429 and Retry-After: 1 for 10 s, then every request
// for 6 s, as API priority and fairness would under overload.
func TestFaultThrottled429(t *testing.T) {
	t.Parallel()
	r, px := proxiedRig(t, "conditions")
	stopKubelet := r.runKubelet()
	stopFlips := r.flipEvery(2 * time.Second)
	px.SetFaults(faultproxy.Fault{Code: http.StatusTooManyRequests, RetryAfter: 1, Share: 0.5})
	time.Sleep(10 * time.Second) // the fault's length
	px.SetFaults(faultproxy.Fault{Code: http.StatusTooManyRequests, RetryAfter: 1})
	px.CutWatches(faultproxy.CutReset) // open watches would outlive the window
	time.Sleep(6 * time.Second)        // the fault's length
	stopFlips()
	px.SetFaults()
	ended := time.Now()
	stopKubelet()
	r.converged("throttled-429", ended)
	r.checkKills("throttled-429", ended)
	if st := px.Stats(); st.Injected == 0 {
		t.Error("the proxy injected no 429")
	} else {
		t.Logf("429s injected: %d", st.Injected)
	}
	r.checkHealthy("throttled-429")
}

// TestFaultServerErrors5xx fails 30% of all requests with 500 for 8 s, then
// every read, watch and status write with 503 for 8 s; neither carries
// Retry-After, so client-go does not retry them itself.
func TestFaultServerErrors5xx(t *testing.T) {
	t.Parallel()
	r, px := proxiedRig(t, "conditions")
	stopKubelet := r.runKubelet()
	stopFlips := r.flipEvery(2 * time.Second)
	px.SetFaults(faultproxy.Fault{Code: http.StatusInternalServerError, Share: 0.3})
	time.Sleep(8 * time.Second) // the fault's length
	px.SetFaults(faultproxy.Fault{Classes: faultproxy.Read | faultproxy.Watch | faultproxy.StatusWrite, Code: http.StatusServiceUnavailable})
	px.CutWatches(faultproxy.CutReset)
	time.Sleep(8 * time.Second) // the fault's length
	stopFlips()
	px.SetFaults()
	ended := time.Now()
	stopKubelet()
	r.converged("server-errors-5xx", ended)
	r.checkKills("server-errors-5xx", ended)
	if n := r.statusWrites("error"); n == 0 {
		t.Error("probed counted no failed status write; the 5xx window should fail some")
	} else {
		t.Logf("status writes failed by 5xx: %d; injected: %d", n, px.Stats().Injected)
	}
	r.checkHealthy("server-errors-5xx")
}
