package proc

import (
	"path/filepath"
	"sync"
	"testing"
	"time"
)

// DaemonOptions are what a tier wants of the daemon (probed, the webhook)
// one test starts and owns.
type DaemonOptions struct {
	// Env replaces the daemon's environment; nil inherits ours.
	Env []string
	// Grace is how long Shutdown waits after SIGTERM before it SIGKILLs
	// the daemon and fails the test; default 30 s.
	Grace time.Duration
	// CleanExit fails the test when the daemon did not exit 0 (a race
	// report exits 66), checked by Shutdown.
	CleanExit bool
	// KillAtEnd ends the daemon with SIGKILL when the test ends, instead of
	// Shutdown: for one whose shutdown is not under test.
	KillAtEnd bool
	// TailLines of its log are logged when the test failed; default 40.
	TailLines int
}

// Daemon is a child process whose life is one test's: its log and PID file
// are in the test's temporary directory, and it is ended, and its log's tail
// shown on failure, when the test ends.
type Daemon struct {
	*Process
	tb   testing.TB
	opts DaemonOptions
	once sync.Once
}

// StartDaemon runs bin with args for the test tb, logging to <name>.log,
// and returns without waiting for it to be ready.
func StartDaemon(tb testing.TB, name, bin string, args []string, o DaemonOptions) *Daemon {
	tb.Helper()
	if o.Grace == 0 {
		o.Grace = 30 * time.Second
	}
	if o.TailLines == 0 {
		o.TailLines = 40
	}
	dir := tb.TempDir()
	p, err := Start(name, filepath.Join(dir, name+".log"), filepath.Join(dir, name+".pid"), bin, args, Options{Env: o.Env})
	if err != nil {
		tb.Fatal(err)
	}
	d := &Daemon{Process: p, tb: tb, opts: o}
	tb.Cleanup(func() {
		if o.KillAtEnd {
			_ = d.Kill()
		} else {
			d.Shutdown()
		}
		if tb.Failed() {
			tb.Logf("%s log (last %d lines):\n%s", name, o.TailLines, Tail(p.LogPath, o.TailLines))
		}
	})
	return d
}

// Shutdown ends the daemon as the kubelet ends a pod: SIGTERM, and SIGKILL
// after Grace, which fails the test. Only the first call acts.
func (d *Daemon) Shutdown() {
	d.once.Do(func() {
		killed, err := d.Terminate(d.opts.Grace)
		if err != nil {
			d.tb.Error(err)
		}
		if killed {
			d.tb.Errorf("%s did not exit within %v of SIGTERM", d.Name, d.opts.Grace)
			return
		}
		if err := d.ExitErr(); d.opts.CleanExit && err != nil {
			d.tb.Errorf("%s exited with %v", d.Name, err)
		}
	})
}
