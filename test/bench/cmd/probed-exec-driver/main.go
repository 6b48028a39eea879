// Command probed-exec-driver runs exec probes through probed's Prober over
// the pkg/cri runtimes for containerd against a private containerd (figure 6). It is apart
// from probed-driver so that the network driver does not link the
// containerd client: its init-time heap would change the GC pacing, and so
// the CPU, of the network figures.
package main

import "github.com/probed-dev/probed/test/bench/benchkit"

func main() {
	benchkit.Main(benchkit.Driver{
		Impl:  "probed",
		Extra: map[string]func([]string) (any, error){"exec": runExec},
	})
}

// noEvents is the worker's event sink when nothing is recorded; success
// paths never call it.
type noEvents struct{}

func (noEvents) Event(string, string, string) {}
