package probeview

import (
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"

	"github.com/probed-dev/probed/pkg/status"
)

// WhoOptions say how Who prints.
type WhoOptions struct {
	// Namespaces adds a NAMESPACE column (kubectl's -A).
	Namespaces bool
}

// Who writes one row per pod, sorted by namespace and name: its node, who
// runs each of its probes, whether it has probed's readiness gate, the
// probed pod on its node, its probed.io/ready condition, and what is wrong.
func Who(w io.Writer, views []PodView, o WhoOptions) error {
	views = slices.Clone(views)
	slices.SortFunc(views, func(a, b PodView) int {
		if c := strings.Compare(a.Namespace, b.Namespace); c != 0 {
			return c
		}
		return strings.Compare(a.Name, b.Name)
	})
	tw := tabwriter.NewWriter(w, 0, 8, 2, ' ', 0)
	head := "POD\tNODE\tPROBES\tGATE\tPROBED ON NODE\tPROBED.IO/READY\tNOTE"
	if o.Namespaces {
		head = "NAMESPACE\t" + head
	}
	fmt.Fprintln(tw, head)
	for _, v := range views {
		row := []string{v.Name, orDash(v.Node), probesCell(v.Probes), yesNo(v.Gated), probedCell(v), readyCell(v.Conditions), orDash(strings.Join(v.Notes, "; "))}
		if o.Namespaces {
			row = append([]string{v.Namespace}, row...)
		}
		for i := range row {
			row[i] = printable(row[i])
		}
		fmt.Fprintln(tw, strings.Join(row, "\t"))
	}
	return tw.Flush()
}

// probesCell groups the probes by container:
// "app:startup=probed,readiness=kubelet sidecar:liveness=kubelet".
func probesCell(probes []ProbeRunner) string {
	if len(probes) == 0 {
		return "none"
	}
	var b strings.Builder
	for i, p := range probes {
		switch {
		case i == 0:
			b.WriteString(p.Container + ":")
		case p.Container != probes[i-1].Container:
			b.WriteString(" " + p.Container + ":")
		default:
			b.WriteString(",")
		}
		b.WriteString(strings.ToLower(p.ProbeType) + "=" + string(p.By))
	}
	return b.String()
}

func probedCell(v PodView) string {
	switch p := v.Probed; {
	case v.Node == "":
		return "-"
	case p == nil:
		return "none"
	case !p.Ready:
		return p.Name + " (not ready)"
	case p.DryRun:
		return p.Name + " (dry-run)"
	default:
		return p.Name
	}
}

// readyCell is probed.io/ready's status, and its reason unless True.
func readyCell(conds []Condition) string {
	for _, c := range conds {
		if c.Type != string(status.PodReadyCondition) {
			continue
		}
		if c.Status == "True" || c.Reason == "" {
			return c.Status
		}
		return c.Status + " (" + c.Reason + ")"
	}
	return "-"
}

func yesNo(b bool) string {
	if b {
		return "yes"
	}
	return "no"
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// UnansweredWarning is one line naming the gated pods with no ready probed
// on their node, by node, or "" when there are none.
func UnansweredWarning(views []PodView) string {
	byNode := map[string]int{}
	n := 0
	for _, v := range views {
		if v.Unanswered() {
			byNode[v.Node]++
			n++
		}
	}
	if n == 0 {
		return ""
	}
	nodes := make([]string, 0, len(byNode))
	for node, c := range byNode {
		nodes = append(nodes, fmt.Sprintf("%s (%d)", printable(node), c))
	}
	slices.Sort(nodes)
	return fmt.Sprintf("%d pod(s) wait on the probed.io/ready gate on nodes where no ready probed runs: %s. Nothing updates their readiness there: "+
		"a Ready pod stays Ready, a new one never becomes Ready (alert ProbedGatedPodsWithoutProbed)", n, strings.Join(nodes, ", "))
}
