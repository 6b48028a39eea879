package containerd

import "slices"

// userHZ is the unit of /proc/<pid>/stat's times; 100 on every Linux ABI.
const userHZ = 100

// procInfo is one process of a container, from /proc.
type procInfo struct {
	pid, session int
	start        uint64 // clock ticks since boot
	cmdline      []string
}

// pickExecRoot finds the session of an exec that started at ticks start
// with cmd, among a container's processes, and says whether its command
// (the session leader) still runs, and since when. 0 means none.
//
// runc makes every exec'd command a session leader, so the candidates are
// the session leaders, other than init's session, that started at or after
// start (one tick of slack for rounding). Among them it prefers:
//  1. the earliest whose command line is cmd (a command that exec'd another
//     program no longer shows it);
//  2. else the earliest whose command line is not that of another exec of
//     ours in the container (others).
//
// With no leader left (the command exited), it is the earliest-started
// session, whose leader is gone, of processes started since: what the
// command left behind.
func pickExecRoot(procs []procInfo, initPID int, cmd []string, start uint64, others [][]string) (root int, alive bool, since uint64) {
	recent := func(p procInfo) bool { return p.start+1 >= start }
	initSession := 0
	live := make(map[int]bool, len(procs))
	for _, p := range procs {
		live[p.pid] = true
		if p.pid == initPID {
			initSession = p.session
		}
	}
	var exact, other, orphan *procInfo
	earlier := func(cur *procInfo, p *procInfo) bool { return cur == nil || p.start < cur.start }
	for i := range procs {
		p := &procs[i]
		if p.pid == initPID || p.session == initSession || !recent(*p) {
			continue
		}
		switch {
		case p.session == p.pid && slices.Equal(p.cmdline, cmd):
			if earlier(exact, p) {
				exact = p
			}
		case p.session == p.pid:
			if !slices.ContainsFunc(others, func(o []string) bool { return slices.Equal(o, p.cmdline) }) && earlier(other, p) {
				other = p
			}
		case !live[p.session]:
			if earlier(orphan, p) {
				orphan = p
			}
		}
	}
	switch {
	case exact != nil:
		return exact.pid, true, exact.start
	case other != nil:
		return other.pid, true, other.start
	case orphan != nil:
		return orphan.session, false, orphan.start
	}
	return 0, false, 0
}
