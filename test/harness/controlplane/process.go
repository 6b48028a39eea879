package controlplane

import (
	"fmt"
	"path/filepath"

	"github.com/probed-dev/probed/test/harness/proc"
)

// startProcess runs one child (etcd or kube-apiserver) logging to logPath,
// with its PID in <name>.pid next to the log.
func startProcess(name, logPath, bin string, args []string, detached bool) (*proc.Process, error) {
	pidFile := filepath.Join(filepath.Dir(logPath), name+".pid")
	return proc.Start(name, logPath, pidFile, bin, args, proc.Options{Detached: detached})
}

// startFailure is p.Failure, marked errPortTaken when the child lost a port
// race, which is worth a retry on other ports.
func startFailure(p *proc.Process, format string, args ...any) error {
	err := p.Failure(format, args...)
	if p.LogSays("address already in use") {
		return fmt.Errorf("%w: %v", errPortTaken, err)
	}
	return err
}
