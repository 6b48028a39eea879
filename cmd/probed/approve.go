package main

import (
	"fmt"
	"io"
	"os"

	v1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"

	"github.com/probed-dev/probed/pkg/probespec"
)

// approvedReachUsage is `probed approved-reach --help`.
const approvedReachUsage = `usage: probed approved-reach [POD.yaml]

Prints the probed.io/approved-reach value that approves what the pod's
probed.io/probes runs or reaches now (docs/security.md). The pod is read,
as YAML or JSON, from the file or from stdin, e.g.

  kubectl get pod web -o yaml | probed approved-reach

Only a user allowed to create pods/exec on the pod may set the value.
Review the probes first: the value approves them as they are.
`

// approvedReach runs `probed approved-reach` and returns its exit code.
func approvedReach(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	in := stdin
	switch {
	case len(args) == 1 && (args[0] == "-h" || args[0] == "--help" || args[0] == "-help"):
		fmt.Fprint(stdout, approvedReachUsage)
		return 0
	case len(args) == 1:
		f, err := os.Open(args[0])
		if err != nil {
			fmt.Fprintf(stderr, "probed approved-reach: %v\n", err)
			return 1
		}
		defer f.Close()
		in = f
	case len(args) > 1:
		fmt.Fprint(stderr, approvedReachUsage)
		return 2
	}
	b, err := io.ReadAll(in)
	if err != nil {
		fmt.Fprintf(stderr, "probed approved-reach: %v\n", err)
		return 1
	}
	pod := &v1.Pod{}
	if err := yaml.Unmarshal(b, pod); err != nil {
		fmt.Fprintf(stderr, "probed approved-reach: not a pod: %v\n", err)
		return 1
	}
	if pod.Kind != "Pod" {
		fmt.Fprintf(stderr, "probed approved-reach: want one Pod, got kind %q\n", pod.Kind)
		return 1
	}
	v, err := probespec.ApproveReach(pod)
	if err != nil {
		fmt.Fprintf(stderr, "probed approved-reach: %v\n", err)
		return 1
	}
	fmt.Fprintln(stdout, v)
	return 0
}
