package lifecycle

import (
	"context"
	"sync"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// guard bounds every wait on the code under test; behaviour is never timed.
const guard = 10 * time.Second

func testPod(ip string) *v1.Pod {
	p := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "web", UID: "uid-1"}}
	if ip != "" {
		p.Status.PodIP = ip
		p.Status.PodIPs = []v1.PodIP{{IP: ip}}
	}
	return p
}

// fakeExec records one exec and answers it, or blocks until ctx ends.
type fakeExec struct {
	mu      sync.Mutex
	id      string
	cmd     []string
	timeout time.Duration
	calls   int
	output  string
	code    int
	err     error
	block   bool
}

func (f *fakeExec) ExecInContainer(ctx context.Context, id string, cmd []string, timeout time.Duration) ([]byte, int, error) {
	f.mu.Lock()
	f.id, f.cmd, f.timeout = id, cmd, timeout
	f.calls++
	block := f.block
	f.mu.Unlock()
	if block {
		<-ctx.Done()
		return nil, -1, ctx.Err()
	}
	return []byte(f.output), f.code, f.err
}

// fakeRecorder records events as "container type reason message".
type fakeRecorder struct {
	mu     sync.Mutex
	events []string
}

func (r *fakeRecorder) Event(_ *v1.Pod, container, eventType, reason, message string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.events = append(r.events, container+"|"+eventType+"|"+reason+"|"+message)
}

func (r *fakeRecorder) list() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.events...)
}

// runAsync runs fn in a goroutine and returns a channel with its error.
func runAsync(fn func() error) <-chan error {
	ch := make(chan error, 1)
	go func() { ch <- fn() }()
	return ch
}

func recvErr(t *testing.T, ch <-chan error, what string) error {
	t.Helper()
	select {
	case err := <-ch:
		return err
	case <-time.After(guard):
		t.Fatalf("timed out waiting for %s", what)
	}
	return nil
}
