package prober

import (
	"context"
	"net/http"
	"testing"
	"time"
)

// TestTargetTimeoutReplacesSeconds: Target.Timeout
// (probed.io/timeoutMilliseconds) replaces timeoutSeconds: an answer after
// 500 ms passes within the spec's 1 s and fails within 100 ms.
func TestTargetTimeoutReplacesSeconds(t *testing.T) {
	release := make(chan struct{})
	defer close(release)
	_, _, port := serve(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-time.After(500 * time.Millisecond):
		case <-release:
		}
		_, _ = w.Write([]byte("ok"))
	}))
	p := New(nil, Options{})
	res, out, err := p.runOnce(context.Background(), httpSpec("/", port), Target{PodIP: "127.0.0.1", Timeout: 100 * time.Millisecond})
	if err != nil || res != Failure {
		t.Errorf("with a 100ms timeout: %v %q %v; want a timeout Failure", res, out, err)
	}
	res, out, err = p.runOnce(context.Background(), httpSpec("/", port), Target{PodIP: "127.0.0.1"})
	if err != nil || res != Success {
		t.Errorf("with timeoutSeconds 1: %v %q %v; want Success", res, out, err)
	}
}
