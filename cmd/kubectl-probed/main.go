// Command kubectl-probed is probed's kubectl plugin (`kubectl probed`):
//
//	kubectl probed status [TYPE/NAME…] [-l S] [-A]  who probes which pods
//	kubectl probed status POD      each probe's state and last 10 results
//	kubectl probed top [--node N]  the node's probes and what they cost
//	kubectl probed convert [file…] move spec probes into probed's annotation
//
// It reads probed's /debug/probes and /metrics through the API server, with
// the caller's own token: see pkg/probedclient and docs/kubectl-plugin.md.
package main

import (
	"os"

	"k8s.io/utils/clock"
)

func main() {
	os.Exit(run(os.Args[1:], streams{In: os.Stdin, Out: os.Stdout, ErrOut: os.Stderr}, clock.RealClock{}, probedConvert))
}
