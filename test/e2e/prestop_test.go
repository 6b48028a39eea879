//go:build e2e

package e2e

import (
	"fmt"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// The preStop scenarios: probed's liveness kill is the kubelet's
// killContainer. The app's first container fails its liveness probe; its
// restarted container passes. Every step leaves a mark on an emptyDir that
// the restarted container still sees: the preStop hook its start and end,
// the app the SIGTERM it traps and ignores, so that SIGKILL only comes at
// the end of the grace period probed stopped it with. The marks are touched
// files, read back with nanosecond mtimes through kubectl exec; the kubelet
// reports the container's death (lastState.terminated.finishedAt) in whole
// seconds.

// prestopApp is the app: healthy (/tmp/healthy) only in a restarted
// container, SIGTERM marked and ignored.
const prestopApp = `
if [ -e /data/started ]; then touch /tmp/healthy; fi
touch /data/started
trap 'touch /data/term' TERM
%s
while true; do sleep 1 & wait $!; done
`

// cgiHook is the httpGet hook's handler: busybox httpd runs it as a CGI.
const cgiHook = `mkdir -p /tmp/www/cgi-bin
cat > /tmp/www/cgi-bin/prestop <<'EOS'
#!/bin/sh
touch /data/hook-start
sleep 3
touch /data/hook-end
printf 'Content-Type: text/plain\r\n\r\ndrained\n'
EOS
chmod +x /tmp/www/cgi-bin/prestop
httpd -f -p 8080 -h /tmp/www &`

func execPreStop(script string) *v1.LifecycleHandler {
	return &v1.LifecycleHandler{Exec: &v1.ExecAction{Command: []string{"/bin/sh", "-c", script}}}
}

type prestopCase struct {
	name  string
	grace int64
	hook  *v1.LifecycleHandler
	setup string // more of the app's script, before its loop
	// hookTook bounds the SIGTERM's time after the hook's start mark.
	hookTook [2]time.Duration
	// stopGrace bounds the grace period probed should stop with: the grace
	// period less the whole seconds the hook took, at least 2 s.
	stopGrace [2]int64
	// completes: the hook finishes within the grace period (an end mark,
	// before the SIGTERM, and no FailedPreStopHook).
	completes bool
}

var prestopCases = []prestopCase{
	{
		name: "exec-hook", grace: 12,
		hook:     execPreStop("touch /data/hook-start; sleep 5; touch /data/hook-end"),
		hookTook: [2]time.Duration{4900 * time.Millisecond, 7500 * time.Millisecond},
		// 12 s less 5 (6 if the exec's setup pushed the hook past 6 s).
		stopGrace: [2]int64{5, 7}, completes: true,
	},
	{
		name: "exec-hook-outlives-grace", grace: 6,
		hook: execPreStop("touch /data/hook-start; sleep 30; touch /data/hook-end"),
		// Stopped at the grace period's end, with the 2 s minimum.
		hookTook:  [2]time.Duration{4500 * time.Millisecond, 8 * time.Second},
		stopGrace: [2]int64{2, 2},
	},
	{
		name: "httpget-hook", grace: 10,
		hook:      &v1.LifecycleHandler{HTTPGet: &v1.HTTPGetAction{Path: "/cgi-bin/prestop", Port: intstr.FromInt32(8080)}},
		setup:     cgiHook,
		hookTook:  [2]time.Duration{2900 * time.Millisecond, 5500 * time.Millisecond},
		stopGrace: [2]int64{6, 7}, completes: true,
	},
}

// TestPreStop runs each case's liveness kill on the real node.
func TestPreStop(t *testing.T) {
	for _, tc := range prestopCases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			s := newSC(t, "prestop-"+tc.name, regular)
			s.group = "prestop"
			s.runPreStop(tc)
		})
	}
}

func (s *sc) runPreStop(tc prestopCase) {
	pod := s.newPod("app", shell(fmt.Sprintf(prestopApp, tc.setup)), probes{
		Liveness: &v1.Probe{ProbeHandler: execHandler("cat", "/tmp/healthy"),
			InitialDelaySeconds: 5, PeriodSeconds: 5, TimeoutSeconds: 5, FailureThreshold: 1},
	})
	c := &pod.Spec.Containers[0]
	c.Lifecycle = &v1.Lifecycle{PreStop: tc.hook}
	c.VolumeMounts = []v1.VolumeMount{{Name: "data", MountPath: "/data"}}
	pod.Spec.Volumes = []v1.Volume{{Name: "data", VolumeSource: v1.VolumeSource{EmptyDir: &v1.EmptyDirVolumeSource{}}}}
	// The pod's grace period: the kubelet never uses it here (it kills
	// nothing), so only probed's stop can honour it.
	pod.Spec.TerminationGracePeriodSeconds = ptr(tc.grace)
	if !tc.completes {
		s.allowed = []string{"FailedPreStopHook"}
	}

	p := s.runLivenessTest(pod, 1, 2*time.Minute)
	s.expectEvent(normal, "Killing", s.killingMsg("liveness"))
	term := s.lastTermination(p)
	if term.ExitCode != 137 {
		s.t.Errorf("exit code %d, want 137: the app ignores SIGTERM, so SIGKILL must end it at the end of the grace period", term.ExitCode)
	}

	marks := s.marks("/data/hook-start", "/data/hook-end", "/data/term")
	start, ok := marks["/data/hook-start"]
	if !ok {
		s.t.Fatalf("no preStop mark: the hook never ran (marks %v)", marks)
	}
	sigterm, ok := marks["/data/term"]
	if !ok {
		s.t.Fatalf("no SIGTERM mark (marks %v)", marks)
	}
	end, ended := marks["/data/hook-end"]
	switch {
	case tc.completes && !ended:
		s.t.Errorf("the hook did not finish (no end mark) within the %ds grace period", tc.grace)
	case tc.completes && sigterm.Before(end):
		s.t.Errorf("SIGTERM at %s came before the hook ended at %s", sigterm.Format(time.StampMicro), end.Format(time.StampMicro))
	case !tc.completes && ended:
		s.t.Errorf("the hook finished (end mark at %s), want it cut short by the stop", end.Format(time.StampMicro))
	}
	if tc.completes {
		s.expectNoProbedEvent("FailedPreStopHook", "")
	} else {
		s.expectEvent(warning, "FailedPreStopHook", "PreStopHook failed")
	}

	hookTook := sigterm.Sub(start)
	// finishedAt is whole seconds, truncated: the container died in
	// [finishedAt, finishedAt+1s), so the stop took more than
	// stopGrace-1 s and (allowing for the runtime) at most stopGrace+1 s.
	stopTook := term.FinishedAt.Sub(sigterm)
	s.note("hook ran %v before SIGTERM; SIGKILL %v after SIGTERM (finishedAt %s, whole seconds); grace %ds",
		hookTook.Round(10*time.Millisecond), stopTook.Round(10*time.Millisecond), term.FinishedAt.Format(time.TimeOnly), tc.grace)
	if hookTook < tc.hookTook[0] || hookTook > tc.hookTook[1] {
		s.t.Errorf("SIGTERM came %v after the hook started, want %v to %v", hookTook, tc.hookTook[0], tc.hookTook[1])
	}
	lo, hi := time.Duration(tc.stopGrace[0]-1)*time.Second, time.Duration(tc.stopGrace[1]+1)*time.Second
	if stopTook <= lo || stopTook > hi {
		s.t.Errorf("the container died %v after SIGTERM, want a stop grace of %d to %d s (the %ds grace less the hook's whole seconds, at least 2): (%v, %v]",
			stopTook, tc.stopGrace[0], tc.stopGrace[1], tc.grace, lo, hi)
	}
}

// marks stats files in the probed container and returns the mtimes of
// those that exist.
func (s *sc) marks(paths ...string) map[string]time.Time {
	s.t.Helper()
	// A missing mark is left out rather than failing the exec.
	script := `for f in "$@"; do [ -e "$f" ] && stat -c '%n|%y' "$f"; done; true`
	out, err := kubectl(s.ctx, append([]string{"exec", "-n", s.ns, s.podName, "-c", s.container, "--", "/bin/sh", "-c", script, "sh"}, paths...)...)
	if err != nil {
		s.t.Fatalf("reading the marks: %v\n%s", err, out)
	}
	got := map[string]time.Time{}
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		name, stamp, ok := strings.Cut(line, "|")
		if !ok {
			continue
		}
		at, err := time.Parse("2006-01-02 15:04:05.999999999 -0700", stamp)
		if err != nil {
			s.t.Fatalf("mark %s: %v", name, err)
		}
		got[name] = at
	}
	s.t.Logf("marks: %v", got)
	return got
}
