package containerd

import (
	"testing"
	"time"
)

func TestPickExecRoot(t *testing.T) {
	const initPID, t0 = 100, 5000
	init := procInfo{pid: initPID, session: initPID, start: 10, cmdline: []string{"sleep", "inf"}}
	cmd := []string{"sh", "-c", "sleep 9"}
	for _, tc := range []struct {
		name      string
		procs     []procInfo
		others    [][]string
		wantRoot  int
		wantAlive bool
	}{
		{"nothing but init", []procInfo{init}, nil, 0, false},
		{"our command, a child and a setsid child", []procInfo{init,
			{pid: 200, session: 200, start: t0 + 2, cmdline: cmd},
			{pid: 201, session: 200, start: t0 + 3, cmdline: []string{"sleep", "9"}},
			{pid: 202, session: 202, start: t0 + 3, cmdline: []string{"sleep", "8"}},
		}, nil, 200, true},
		{"an exec that started before ours is not ours", []procInfo{init,
			{pid: 150, session: 150, start: t0 - 50, cmdline: cmd},
		}, nil, 0, false},
		{"one tick of rounding is allowed", []procInfo{init,
			{pid: 150, session: 150, start: t0 - 1, cmdline: cmd},
		}, nil, 150, true},
		{"the exact command line wins over an earlier other exec", []procInfo{init,
			{pid: 300, session: 300, start: t0 + 1, cmdline: []string{"cat", "/x"}},
			{pid: 301, session: 301, start: t0 + 4, cmdline: cmd},
		}, nil, 301, true},
		{"a command that exec'd another program: the earliest leader", []procInfo{init,
			{pid: 400, session: 400, start: t0 + 1, cmdline: []string{"sleep", "9"}},
			{pid: 401, session: 401, start: t0 + 5, cmdline: []string{"sleep", "7"}},
		}, nil, 400, true},
		{"another exec of ours in the container is not taken", []procInfo{init,
			{pid: 500, session: 500, start: t0 + 1, cmdline: []string{"cat", "/ready"}},
			{pid: 501, session: 501, start: t0 + 2, cmdline: []string{"sleep", "9"}},
		}, [][]string{{"cat", "/ready"}}, 501, true},
		{"the command exited: the session it left behind", []procInfo{init,
			{pid: 601, session: 600, start: t0 + 3, cmdline: []string{"sleep", "9"}},
			{pid: 602, session: 600, start: t0 + 4, cmdline: []string{"sleep", "9"}},
		}, nil, 600, false},
		{"leftovers older than our exec are not ours", []procInfo{init,
			{pid: 701, session: 700, start: t0 - 100, cmdline: []string{"sleep", "9"}},
		}, nil, 0, false},
		{"init's own session is never taken", []procInfo{init,
			{pid: 801, session: initPID, start: t0 + 3, cmdline: cmd},
		}, nil, 0, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			root, alive, _ := pickExecRoot(tc.procs, initPID, cmd, t0, tc.others)
			if root != tc.wantRoot || alive != tc.wantAlive {
				t.Errorf("got (%d, %v), want (%d, %v)", root, alive, tc.wantRoot, tc.wantAlive)
			}
		})
	}
}

func TestWaitMore(t *testing.T) {
	const now = 10_000 // ticks
	second := uint64(userHZ)
	for _, tc := range []struct {
		name           string
		f              foundExec
		timeout        time.Duration
		waitedToAppear bool
		want           time.Duration
	}{
		{"running for its whole timeout: kill", foundExec{root: 7, alive: true, start: now - 2*second}, 2 * time.Second, false, 0},
		{"started late, 0.5 s ago: wait the other 1.5 s", foundExec{root: 7, alive: true, start: now - second/2}, 2 * time.Second, false, 1500 * time.Millisecond},
		{"within a tick of its timeout: kill", foundExec{root: 7, alive: true, start: now - 2*second + 1}, 2 * time.Second, false, 0},
		{"not seen yet: one more timeout", foundExec{}, time.Second, false, time.Second},
		{"still not seen after that: give up", foundExec{}, time.Second, true, 0},
		{"cannot see the container's processes: no wait", foundExec{blind: true}, time.Second, false, 0},
		{"only leftovers of an exited command: kill now", foundExec{root: 9, start: now - 1}, time.Second, false, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := waitMore(tc.f, now, tc.timeout, tc.waitedToAppear); got != tc.want {
				t.Errorf("waitMore = %v, want %v", got, tc.want)
			}
		})
	}
}
