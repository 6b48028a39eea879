package execout

import (
	"context"
	"sync"
	"time"

	"github.com/probed-dev/probed/pkg/cri"
)

// CappedBuffer keeps the first max bytes written and discards the rest while
// still reporting success, so the writer (a FIFO copier) keeps draining the
// pipe and the command never blocks on a full pipe. Memory is at most max.
type CappedBuffer struct {
	mu  sync.Mutex
	max int
	buf []byte
}

func NewCappedBuffer(max int) *CappedBuffer { return &CappedBuffer{max: max} }

func (b *CappedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if room := b.max - len(b.buf); room > 0 {
		if len(p) < room {
			room = len(p)
		}
		b.buf = append(b.buf, p[:room]...)
	}
	return len(p), nil
}

func (b *CappedBuffer) Bytes() []byte {
	b.mu.Lock()
	defer b.mu.Unlock()
	return append([]byte(nil), b.buf...)
}

// Combine joins stdout and stderr the kubelet's way and caps the result.
func Combine(stdout, stderr []byte) []byte {
	n := len(stdout) + len(stderr)
	if n > cri.MaxOutputBytes {
		n = cri.MaxOutputBytes
	}
	out := make([]byte, 0, n)
	out = append(out, stdout[:min(len(stdout), n)]...)
	return append(out, stderr[:min(len(stderr), n-len(out))]...)
}

// WithOptionalTimeout is context.WithTimeout, or WithCancel when timeout <= 0.
func WithOptionalTimeout(ctx context.Context, timeout time.Duration) (context.Context, context.CancelFunc) {
	if timeout <= 0 {
		return context.WithCancel(ctx)
	}
	return context.WithTimeout(ctx, timeout)
}
