package proc

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

// recorder is a testing.TB whose failures are recorded, not reported.
type recorder struct {
	testing.TB
	errs []string
}

func (r *recorder) Errorf(format string, args ...any) {
	r.errs = append(r.errs, fmt.Sprintf(format, args...))
}
func (r *recorder) Error(args ...any) { r.errs = append(r.errs, fmt.Sprint(args...)) }

func TestDaemonOutputLeavesOutTheHeader(t *testing.T) {
	d := StartDaemon(t, "echo", "/bin/sh", []string{"-c", "echo started; exit 0", "marker-in-args"}, DaemonOptions{})
	<-d.Done()
	out, err := d.Output()
	if err != nil {
		t.Fatal(err)
	}
	if string(out) != "started\n" {
		t.Errorf("Output() = %q, want only what the child wrote", out)
	}
	if d.LogSays("marker-in-args") {
		t.Error("LogSays matched the header's arguments")
	}
}

func TestDaemonShutdown(t *testing.T) {
	for _, tc := range []struct {
		name, script string
		o            DaemonOptions
		want         string // in the recorded error; "" for none
	}{
		{"clean exit on SIGTERM", "trap 'exit 0' TERM; while :; do sleep 0.05; done", DaemonOptions{CleanExit: true}, ""},
		{"exit 66 with CleanExit", "trap 'exit 66' TERM; while :; do sleep 0.05; done", DaemonOptions{CleanExit: true}, "exited with exit status 66"},
		{"exit 66 without CleanExit", "trap 'exit 66' TERM; while :; do sleep 0.05; done", DaemonOptions{}, ""},
		{"ignores SIGTERM", "trap '' TERM; while :; do sleep 0.05; done", DaemonOptions{Grace: 300 * time.Millisecond}, "did not exit within 300ms of SIGTERM"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := &recorder{TB: t}
			d := StartDaemon(r, "sh", "/bin/sh", []string{"-c", "echo up; " + tc.script}, tc.o)
			for !d.LogSays("up") {
				time.Sleep(10 * time.Millisecond)
			}
			d.Shutdown()
			d.Shutdown() // only the first acts
			got := strings.Join(r.errs, "; ")
			if tc.want == "" && got != "" || !strings.Contains(got, tc.want) || len(r.errs) > 1 {
				t.Errorf("errors %q, want one saying %q", got, tc.want)
			}
			if done, _ := d.Exited(); !done {
				t.Error("still running after Shutdown")
			}
		})
	}
}
