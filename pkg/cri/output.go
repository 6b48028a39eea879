package cri

import "sync"

// MaxOutputBytes caps what an exec returns: stdout then stderr, as the kubelet
// joins them, cut at the kubelet's 10 KiB.
const MaxOutputBytes = 10 * 1024

// cappedBuffer keeps the first max bytes written and discards the rest while
// still reporting success, so the writer (a FIFO copier) keeps draining the
// pipe and the command never blocks on a full pipe. Memory is at most max.
type cappedBuffer struct {
	mu  sync.Mutex
	max int
	buf []byte
}

func newCappedBuffer(max int) *cappedBuffer { return &cappedBuffer{max: max} }

func (b *cappedBuffer) Write(p []byte) (int, error) {
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

func (b *cappedBuffer) Bytes() []byte {
	b.mu.Lock()
	defer b.mu.Unlock()
	return append([]byte(nil), b.buf...)
}

// combineOutput joins stdout and stderr the kubelet's way and caps the result.
func combineOutput(stdout, stderr []byte) []byte {
	n := len(stdout) + len(stderr)
	if n > MaxOutputBytes {
		n = MaxOutputBytes
	}
	out := make([]byte, 0, n)
	out = append(out, stdout[:min(len(stdout), n)]...)
	return append(out, stderr[:min(len(stderr), n-len(out))]...)
}
