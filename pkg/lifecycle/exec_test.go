package lifecycle

import (
	"context"
	"errors"
	"slices"
	"testing"

	v1 "k8s.io/api/core/v1"
)

func execHook(cmd ...string) *v1.LifecycleHandler {
	return &v1.LifecycleHandler{Exec: &v1.ExecAction{Command: cmd}}
}

func TestExecHook(t *testing.T) {
	app := &v1.Container{Name: "app"}
	t.Run("success runs the command once, with no timeout of its own", func(t *testing.T) {
		f := &fakeExec{output: "drained"}
		r := New(f, Options{})
		if err := r.Run(context.Background(), testPod(""), app, "containerd://abc", execHook("sh", "-c", "drain")); err != nil {
			t.Fatalf("Run = %v", err)
		}
		if f.calls != 1 || f.id != "containerd://abc" || !slices.Equal(f.cmd, []string{"sh", "-c", "drain"}) || f.timeout != 0 {
			t.Errorf("exec x%d in %q: %q, timeout %v; want once in containerd://abc, no timeout", f.calls, f.id, f.cmd, f.timeout)
		}
	})
	t.Run("a non-zero exit fails with the kubelet's message", func(t *testing.T) {
		f := &fakeExec{output: "oops\n", code: 3}
		err := New(f, Options{}).Run(context.Background(), testPod(""), app, "containerd://abc", execHook("sh", "-c", "exit 3"))
		want := `Exec lifecycle hook ([sh -c exit 3]) for Container "app" in Pod "web_ns(uid-1)" failed - error: command 'sh -c exit 3' exited with 3: oops` + "\n" + `, message: "oops\n"`
		if err == nil || err.Error() != want {
			t.Errorf("Run = %v\nwant   %s", err, want)
		}
		var he *HookError
		if !errors.As(err, &he) {
			t.Errorf("error %T is not a *HookError", err)
		}
	})
	t.Run("a runtime error fails, wrapped", func(t *testing.T) {
		cause := errors.New("container not running")
		f := &fakeExec{err: cause, code: -1}
		err := New(f, Options{}).Run(context.Background(), testPod(""), app, "containerd://abc", execHook("true"))
		want := `Exec lifecycle hook ([true]) for Container "app" in Pod "web_ns(uid-1)" failed - error: container not running, message: ""`
		if err == nil || err.Error() != want || !errors.Is(err, cause) {
			t.Errorf("Run = %v, want %q wrapping the cause", err, want)
		}
	})
	t.Run("no runtime", func(t *testing.T) {
		err := New(nil, Options{}).Run(context.Background(), testPod(""), app, "containerd://abc", execHook("true"))
		if !errors.Is(err, errNoRuntime) {
			t.Errorf("Run = %v, want errNoRuntime", err)
		}
	})
	t.Run("ends when ctx ends", func(t *testing.T) {
		f := &fakeExec{block: true}
		ctx, cancel := context.WithCancel(context.Background())
		done := runAsync(func() error {
			return New(f, Options{}).Run(ctx, testPod(""), app, "containerd://abc", execHook("sleep", "100"))
		})
		cancel()
		if err := recvErr(t, done, "the exec hook"); !errors.Is(err, context.Canceled) {
			t.Errorf("Run = %v, want the context's error", err)
		}
	})
}

func TestInvalidHandler(t *testing.T) {
	h := &v1.LifecycleHandler{TCPSocket: &v1.TCPSocketAction{}}
	err := New(&fakeExec{}, Options{}).Run(context.Background(), testPod(""), &v1.Container{Name: "app"}, "containerd://abc", h)
	if err == nil || !errors.As(err, new(*HookError)) {
		t.Fatalf("Run = %v, want a HookError", err)
	}
	if got := err.Error(); len(got) < len("Cannot run handler: invalid handler: ") || got[:37] != "Cannot run handler: invalid handler: " {
		t.Errorf("Run = %q, want the kubelet's \"Cannot run handler: invalid handler: ...\"", got)
	}
}
