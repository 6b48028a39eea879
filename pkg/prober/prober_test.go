package prober

import (
	"context"
	"errors"
	"net/http"
	"reflect"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/probed-dev/probed/pkg/probespec"
	"github.com/probed-dev/probed/pkg/results"
)

func execSpec(cmd ...string) *v1.Probe {
	return &v1.Probe{TimeoutSeconds: 3, ProbeHandler: v1.ProbeHandler{Exec: &v1.ExecAction{Command: cmd}}}
}

// TestProbeRetries: only handler errors are retried, at most 3 tries in all.
func TestProbeRetries(t *testing.T) {
	boom := errors.New("runtime unavailable")
	slotTimeout := throttledError{}
	cases := []struct {
		name       string
		fn         func(call int) ([]byte, int, error)
		wantCalls  int
		wantResult results.Result
		wantOutput string
		wantErr    error
		wantEvents []event
	}{
		{
			name:       "success runs once",
			fn:         func(int) ([]byte, int, error) { return []byte("ok"), 0, nil },
			wantCalls:  1,
			wantResult: results.Success,
			wantOutput: "ok",
		},
		{
			name:       "failure is an answer, not retried",
			fn:         func(int) ([]byte, int, error) { return []byte("nope"), 1, nil },
			wantCalls:  1,
			wantResult: results.Failure,
			wantOutput: "nope",
			wantEvents: []event{{v1.EventTypeWarning, "Unhealthy", "Liveness probe failed: nope"}},
		},
		{
			name:       "timeout is a failure, not retried",
			fn:         func(int) ([]byte, int, error) { return nil, 0, timeoutError{} },
			wantCalls:  1,
			wantResult: results.Failure,
			wantOutput: `command timed out: "check" timed out after 3s`,
			wantEvents: []event{{v1.EventTypeWarning, "Unhealthy", `Liveness probe failed: command timed out: "check" timed out after 3s`}},
		},
		{
			// probed's own exec cap held the command back: not the
			// container's failure, so no retry, no event, and an error the
			// worker discards.
			name:       "exec slot timeout is an error, not retried, no event",
			fn:         func(int) ([]byte, int, error) { return nil, -1, slotTimeout },
			wantCalls:  1,
			wantResult: results.Failure,
			wantErr:    slotTimeout,
		},
		{
			name:       "error retried three times",
			fn:         func(int) ([]byte, int, error) { return nil, 0, boom },
			wantCalls:  3,
			wantResult: results.Failure,
			wantErr:    boom,
			wantEvents: []event{{v1.EventTypeWarning, "Unhealthy",
				"Liveness probe errored and resulted in unknown state: runtime unavailable"}},
		},
		{
			name: "error then success",
			fn: func(call int) ([]byte, int, error) {
				if call == 1 {
					return nil, 0, boom
				}
				return []byte("ok"), 0, nil
			},
			wantCalls:  2,
			wantResult: results.Success,
			wantOutput: "ok",
		},
		{
			name: "errors then failure",
			fn: func(call int) ([]byte, int, error) {
				if call < 3 {
					return nil, 0, boom
				}
				return []byte("bad"), 2, nil
			},
			wantCalls:  3,
			wantResult: results.Failure,
			wantOutput: "bad",
			wantEvents: []event{{v1.EventTypeWarning, "Unhealthy", "Liveness probe failed: bad"}},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := &fakeRunner{fn: tc.fn}
			sink := &recordingSink{}
			res, out, err := New(r, Options{}).Probe(context.Background(), probespec.Liveness, execSpec("check"), Target{ContainerID: "c1"}, sink)
			if !errors.Is(err, tc.wantErr) || (tc.wantErr == nil && err != nil) {
				t.Fatalf("err = %v; want %v", err, tc.wantErr)
			}
			if res != tc.wantResult || out != tc.wantOutput {
				t.Errorf("Probe = %v, %q; want %v, %q", res, out, tc.wantResult, tc.wantOutput)
			}
			if got := r.count(); got != tc.wantCalls {
				t.Errorf("runner called %d times; want %d", got, tc.wantCalls)
			}
			if got := sink.all(); !reflect.DeepEqual(got, tc.wantEvents) {
				t.Errorf("events = %q; want %q", got, tc.wantEvents)
			}
		})
	}
}

// throttledError is how pkg/cri says an exec never got a slot.
type throttledError struct{}

func (throttledError) Error() string   { return "no exec slot free within 3s" }
func (throttledError) Throttled() bool { return true }

// TestJudge covers the kubelet's mapping of every handler outcome, including
// Unknown without an error, which no built-in handler produces.
func TestJudge(t *testing.T) {
	boom := errors.New("boom")
	cases := []struct {
		name       string
		typ        probespec.ProbeType
		result     Result
		output     string
		err        error
		wantResult results.Result
		wantEvents []event
	}{
		{"success", probespec.Readiness, Success, "fine", nil, results.Success, nil},
		{"warning", probespec.Readiness, Warning, "Probe terminated redirects, Response body: x", nil, results.Success,
			[]event{{"Warning", "ProbeWarning", "Readiness probe warning: Probe terminated redirects, Response body: x"}}},
		{"failure", probespec.Startup, Failure, "HTTP probe failed with statuscode: 500", nil, results.Failure,
			[]event{{"Warning", "Unhealthy", "Startup probe failed: HTTP probe failed with statuscode: 500"}}},
		{"unknown without error", probespec.Liveness, Unknown, "", nil, results.Failure, nil},
		{"unsupported result", probespec.Liveness, Result("odd"), "", nil, results.Failure, nil},
		{"error with unknown", probespec.Liveness, Unknown, "", boom, results.Failure,
			[]event{{"Warning", "Unhealthy", "Liveness probe errored and resulted in unknown state: boom"}}},
		{"error with failure", probespec.Readiness, Failure, "", boom, results.Failure,
			[]event{{"Warning", "Unhealthy", "Readiness probe errored and resulted in failure state: boom"}}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			sink := &recordingSink{}
			res, out, err := judge(tc.typ, tc.result, tc.output, tc.err, "c1", sink)
			if res != tc.wantResult || out != tc.output || err != tc.err {
				t.Errorf("judge = %v, %q, %v; want %v, %q, %v", res, out, err, tc.wantResult, tc.output, tc.err)
			}
			if got := sink.all(); !reflect.DeepEqual(got, tc.wantEvents) {
				t.Errorf("events = %q; want %q", got, tc.wantEvents)
			}
		})
	}
	// A nil sink is allowed.
	if res, _, _ := judge(probespec.Liveness, Failure, "x", nil, "c1", nil); res != results.Failure {
		t.Errorf("judge with nil sink = %v", res)
	}
}

// TestProbeWarningIsSuccess: an HTTP redirect to another host, end to end.
func TestProbeWarningIsSuccess(t *testing.T) {
	_, _, port := serve(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Location", "http://elsewhere.invalid/")
		w.WriteHeader(http.StatusMovedPermanently)
		_, _ = w.Write([]byte("gone"))
	}))
	sink := &recordingSink{}
	res, out, err := New(nil, Options{}).Probe(context.Background(), probespec.Readiness, httpSpec("/", port), Target{PodIP: "127.0.0.1"}, sink)
	if err != nil || res != results.Success || out != "Probe terminated redirects, Response body: gone" {
		t.Fatalf("Probe = %v, %q, %v", res, out, err)
	}
	want := []event{{"Warning", "ProbeWarning", "Readiness probe warning: Probe terminated redirects, Response body: gone"}}
	if got := sink.all(); !reflect.DeepEqual(got, want) {
		t.Errorf("events = %q; want %q", got, want)
	}
}

func TestProbeSpecs(t *testing.T) {
	t.Run("nil spec is success", func(t *testing.T) {
		res, out, err := New(nil, Options{}).Probe(context.Background(), probespec.Liveness, nil, Target{}, nil)
		if res != results.Success || out != "" || err != nil {
			t.Errorf("Probe = %v, %q, %v", res, out, err)
		}
	})
	t.Run("no handler errors", func(t *testing.T) {
		sink := &recordingSink{}
		res, _, err := New(nil, Options{}).Probe(context.Background(), probespec.Startup, &v1.Probe{}, Target{}, sink)
		if res != results.Failure || !errors.Is(err, errNoHandler) {
			t.Errorf("Probe = %v, %v", res, err)
		}
		want := []event{{"Warning", "Unhealthy", "Startup probe errored and resulted in unknown state: missing probe handler"}}
		if got := sink.all(); !reflect.DeepEqual(got, want) {
			t.Errorf("events = %q; want %q", got, want)
		}
	})
	t.Run("exec wins over other handlers, as in the kubelet", func(t *testing.T) {
		r := &fakeRunner{fn: func(int) ([]byte, int, error) { return []byte("exec"), 0, nil }}
		spec := execSpec("true")
		spec.TCPSocket = &v1.TCPSocketAction{Port: intstr.FromInt32(1)}
		_, out, err := New(r, Options{}).Probe(context.Background(), probespec.Liveness, spec, Target{}, nil)
		if err != nil || out != "exec" {
			t.Errorf("Probe = %q, %v", out, err)
		}
	})
	t.Run("zero timeout means one second", func(t *testing.T) {
		var got time.Duration
		r := runnerFunc(func(_ context.Context, _ string, _ []string, timeout time.Duration) ([]byte, int, error) {
			got = timeout
			return nil, 0, nil
		})
		spec := execSpec("true")
		spec.TimeoutSeconds = 0
		_, _, _ = New(r, Options{}).Probe(context.Background(), probespec.Liveness, spec, Target{}, nil)
		if got != time.Second {
			t.Errorf("timeout = %v; want 1s", got)
		}
	})
	t.Run("expanded command reaches the runner", func(t *testing.T) {
		r := &fakeRunner{fn: func(int) ([]byte, int, error) { return nil, 0, nil }}
		target := Target{Env: []v1.EnvVar{{Name: "F", Value: "/tmp/healthy"}}}
		_, _, _ = New(r, Options{}).Probe(context.Background(), probespec.Liveness, execSpec("cat", "$(F)"), target, nil)
		if want := [][]string{{"cat", "/tmp/healthy"}}; !reflect.DeepEqual(r.cmds, want) {
			t.Errorf("cmds = %q; want %q", r.cmds, want)
		}
	})
}

// TestProbeCancelledStopsRetrying: once the caller's context ends, no
// further tries and no event.
func TestProbeCancelledStopsRetrying(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	r := &fakeRunner{fn: func(int) ([]byte, int, error) {
		cancel()
		return nil, 0, context.Canceled
	}}
	sink := &recordingSink{}
	res, _, err := New(r, Options{}).Probe(ctx, probespec.Liveness, execSpec("true"), Target{}, sink)
	if res != results.Failure || !errors.Is(err, context.Canceled) {
		t.Errorf("Probe = %v, %v", res, err)
	}
	if n := r.count(); n != 1 {
		t.Errorf("runner called %d times; want 1", n)
	}
	if ev := sink.all(); len(ev) != 0 {
		t.Errorf("events = %q; want none", ev)
	}
}
