package runtimeservice

import (
	"context"
	"errors"
	"net"
	"path/filepath"
	goruntime "runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/probed-dev/probed/pkg/cri"
	"github.com/probed-dev/probed/pkg/cri/internal/critest"
	"github.com/probed-dev/probed/pkg/cri/internal/dial"
	"github.com/probed-dev/probed/pkg/cri/internal/execout"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/mem"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// encodedAnswer is an ExecSync answer marshalled once, which rawCodec
// sends as it is: the server then allocates next to nothing per call, so
// what a call allocates in this process is the client's.
type encodedAnswer []byte

// rawCodec is grpc-go's proto codec, except that it sends an encodedAnswer
// as it is.
type rawCodec struct{}

func (rawCodec) Name() string { return "proto" }

func (rawCodec) Marshal(v any) (mem.BufferSlice, error) {
	if b, ok := v.(encodedAnswer); ok {
		return mem.BufferSlice{mem.SliceBuffer(b)}, nil
	}
	b, err := proto.Marshal(v.(proto.Message))
	return mem.BufferSlice{mem.SliceBuffer(b)}, err
}

func (rawCodec) Unmarshal(data mem.BufferSlice, v any) error {
	return proto.Unmarshal(data.Materialize(), v.(proto.Message))
}

// answerServer is a CRI runtime whose ExecSync runs "print", which answers
// at once with stdout of the size the test set, and "hang", which answers
// once released (or never); it counts the execs in flight.
type answerServer struct {
	answer   encodedAnswer
	mu       sync.Mutex
	inFlight int
	release  chan struct{}
}

func newAnswerServer(t *testing.T, stdout int) (*answerServer, string) {
	t.Helper()
	b, err := proto.Marshal(&runtimeapi.ExecSyncResponse{Stdout: make([]byte, stdout), ExitCode: 0})
	if err != nil {
		t.Fatal(err)
	}
	s := &answerServer{answer: b, release: make(chan struct{})}
	sock := filepath.Join(t.TempDir(), "cri.sock")
	lis, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer(grpc.ForceServerCodecV2(rawCodec{}), grpc.MaxSendMsgSize(dial.MaxMsgSize),
		grpc.UnknownServiceHandler(s.handle))
	done := make(chan struct{})
	go func() { defer close(done); _ = srv.Serve(lis) }()
	t.Cleanup(func() { srv.Stop(); <-done })
	return s, "unix://" + sock
}

func (s *answerServer) handle(_ any, stream grpc.ServerStream) error {
	if m, _ := grpc.MethodFromServerStream(stream); m != runtimeapi.RuntimeService_ExecSync_FullMethodName {
		return status.Error(codes.Unimplemented, m)
	}
	var req runtimeapi.ExecSyncRequest
	if err := stream.RecvMsg(&req); err != nil {
		return err
	}
	s.mu.Lock()
	s.inFlight++
	s.mu.Unlock()
	defer func() { s.mu.Lock(); s.inFlight--; s.mu.Unlock() }()
	if req.Cmd[0] == "hang" {
		select {
		case <-s.release:
		case <-stream.Context().Done():
			return stream.Context().Err()
		}
	}
	return stream.SendMsg(s.answer)
}

func (s *answerServer) running() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.inFlight
}

func newCRIRuntime(t *testing.T, endpoint string, budget int64) cri.Runtime {
	t.Helper()
	conn, err := dial.Dial(endpoint)
	if err != nil {
		t.Fatal(err)
	}
	rt := New(conn, execout.NewBudget(budget))
	t.Cleanup(func() { _ = rt.Close() })
	return rt
}

// allocated is what f allocated in this process, from the Go runtime's
// cumulative count.
func allocated(f func()) uint64 {
	var before, after goruntime.MemStats
	goruntime.GC()
	goruntime.ReadMemStats(&before)
	f()
	goruntime.ReadMemStats(&after)
	return after.TotalAlloc - before.TotalAlloc
}

// Issue 30, item 2: an ExecSync answer of 8 MiB (containerd sends up to
// 16 MiB) is refused after its first frames, with a text that names the
// limit, instead of being read whole (three times over: as received,
// copied for the decoder, decoded) to keep 10 KiB of it. An answer within
// the limit is read as before.
func TestCRIExecAnswerIsBounded(t *testing.T) {
	for _, tc := range []struct {
		name     string
		stdout   int
		wantErr  string
		maxAlloc uint64
	}{
		{"within the limit", cri.MaxExecAnswerBytes - 64, "", execout.CRIAnswerCost + 1<<20},
		{"8 MiB", 8 << 20, "exceed the 1 MiB probed reads of an exec's answer (the kubelet reads 16 MiB)", 1 << 20},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, endpoint := newAnswerServer(t, tc.stdout)
			rt := newCRIRuntime(t, endpoint, 0)
			// A first call sets up the connection, outside the measure.
			_, _, _ = rt.ExecInContainer(context.Background(), "containerd://abc", []string{"print"}, 5*time.Second)
			var (
				out  []byte
				code int
				err  error
			)
			n := allocated(func() {
				out, code, err = rt.ExecInContainer(context.Background(), "containerd://abc", []string{"print"}, 5*time.Second)
			})
			t.Logf("a %d KiB answer: %d bytes out, code %d, err %v; allocated %d KiB", tc.stdout>>10, len(out), code, err, n>>10)
			switch {
			case tc.wantErr == "" && (err != nil || len(out) != cri.MaxOutputBytes):
				t.Errorf("got %d bytes, %v; want %d bytes", len(out), err, cri.MaxOutputBytes)
			case tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)):
				t.Errorf("got %d bytes, err %v; want an error saying %q", len(out), err, tc.wantErr)
			}
			if n > tc.maxAlloc {
				t.Errorf("allocated %d KiB, bound %d KiB", n>>10, tc.maxAlloc>>10)
			}
		})
	}
}

// A command still running holds none of the output budget: with a budget
// of one answer, ten hung execs leave it free and another exec's answer is
// read at once. An answer that arrives while the budget stays spent until
// the deadline is not read: the exec returns an OutputBudgetError, which
// the prober discards.
func TestCRIOutputBudgetIsTakenByAnswersOnly(t *testing.T) {
	srv, endpoint := newAnswerServer(t, 4<<10)
	rt := newCRIRuntime(t, endpoint, execout.CRIAnswerCost)
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	defer func() { cancel(); wg.Wait() }()
	for range 10 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, _, _ = rt.ExecInContainer(ctx, "containerd://hung", []string{"hang"}, time.Minute)
		}()
	}
	critest.Eventually(t, "ten hung execs in the runtime", func() bool { return srv.running() == 10 })
	out, code, err := rt.ExecInContainer(context.Background(), "containerd://victim", []string{"print"}, 5*time.Second)
	if err != nil || code != 0 || len(out) != 4<<10 {
		t.Fatalf("the victim's exec beside ten hung ones: %d bytes, code %d, %v", len(out), code, err)
	}

	// Spend the whole budget, as answers being read would.
	b := rt.(*CRI).budget
	hold, err := b.Reserve(context.Background(), b.Size())
	if err != nil {
		t.Fatal(err)
	}
	_, _, err = rt.ExecInContainer(context.Background(), "containerd://victim", []string{"print"}, time.Second)
	var be *cri.OutputBudgetError
	if !errors.As(err, &be) || !be.Ran || !be.Throttled() {
		t.Fatalf("with the budget spent: %v; want an cri.OutputBudgetError for an answer not read", err)
	}
	hold()
	if _, _, err := rt.ExecInContainer(context.Background(), "containerd://victim", []string{"print"}, time.Second); err != nil {
		t.Fatalf("once the budget is back: %v", err)
	}
}

// An answer that waits for the output budget holds no more than the call's
// flow-control window: the runtime cannot send the rest until probed reads.
// Without a fixed window, grpc-go grows it (up to 16 MiB) as answers come
// fast, and ten waiting 8 MiB answers held 3 MiB.
func TestCRIAnswerWaitingForTheBudgetHoldsItsWindowAtMost(t *testing.T) {
	_, endpoint := newAnswerServer(t, 8<<20)
	rt := newCRIRuntime(t, endpoint, execout.CRIAnswerCost)
	// Warm the connection up, as a busy node's would be, with answers that
	// are read.
	for range 5 {
		_, _, _ = rt.ExecInContainer(context.Background(), "containerd://warm", []string{"print"}, 5*time.Second)
	}
	b := rt.(*CRI).budget
	hold, err := b.Reserve(context.Background(), b.Size())
	if err != nil {
		t.Fatal(err)
	}
	heap := func() int64 {
		var ms goruntime.MemStats
		goruntime.GC()
		goruntime.ReadMemStats(&ms)
		return int64(ms.HeapAlloc)
	}
	base := heap()
	const n = 10
	var wg sync.WaitGroup
	for range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, _, _ = rt.ExecInContainer(context.Background(), "containerd://x", []string{"print"}, 5*time.Second)
		}()
	}
	critest.Eventually(t, "every answer waiting for the budget", func() bool { return b.Waiting() == n })
	// The frames come right after the headers; take the largest of a few
	// readings.
	var grew int64
	for range 5 {
		time.Sleep(50 * time.Millisecond)
		grew = max(grew, heap()-base)
	}
	hold()
	wg.Wait()
	bound := int64(n * (dial.StreamWindow + 32<<10))
	t.Logf("%d answers of 8 MiB waiting for the budget: live heap %+d KiB (bound %d KiB)", n, grew>>10, bound>>10)
	if grew > bound {
		t.Errorf("live heap grew %d KiB while %d answers waited, bound %d KiB", grew>>10, n, bound>>10)
	}
}

// A runtime that never answers is a timeout at the call's own deadline, as
// before the budget: no answer came, so none waited for the budget.
func TestCRIUnansweredExecIsATimeout(t *testing.T) {
	_, endpoint := newAnswerServer(t, 0)
	rt := newCRIRuntime(t, endpoint, 0)
	_, _, err := rt.ExecInContainer(context.Background(), "containerd://hung", []string{"hang"}, time.Second)
	if !cri.IsTimeout(err) {
		t.Fatalf("got %v; want a timeout", err)
	}
}
