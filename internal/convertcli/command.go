// Package convertcli is the command line of `kubectl probed convert`, which
// `probed convert` runs too: flags, usage, exit codes, files and stdin. The
// conversion itself is pkg/convert's.
package convertcli

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/spf13/pflag"

	"github.com/probed-dev/probed/internal/cliflags"
	"github.com/probed-dev/probed/pkg/convert"
	"github.com/probed-dev/probed/pkg/hostpolicy"
	"github.com/probed-dev/probed/pkg/probespec"
)

// Exit codes of Command.Run.
const (
	ExitOK = 0
	// ExitChanged: with --check, something would change.
	ExitChanged = 1
	// ExitError: bad usage, an unreadable file or a document that could
	// not be converted. Nothing was written.
	ExitError = 2
)

// Command is the command line of `probed convert`: it reads manifests from
// files or stdin, converts them all, and only then writes, so an error
// leaves no partial output.
type Command struct {
	// Name is how usage and errors call the command, e.g. "probed convert".
	Name   string
	Stdin  io.Reader
	Stdout io.Writer
	Stderr io.Writer
}

type input struct {
	name string
	src  []byte
	res  convert.Result
	mode os.FileMode
}

// Run runs the command with its arguments and returns the exit code.
func (c Command) Run(args []string) int {
	fs := pflag.NewFlagSet(c.Name, pflag.ContinueOnError)
	check := fs.Bool("check", false, "write nothing; list on stderr what would change and exit 1 if anything would (for CI)")
	write := fs.BoolP("write", "w", false, "write the converted manifests back to the named files instead of stdout")
	var verbosity level
	fs.VarP(&verbosity, "v", "v", "log level, as kubectl's -v: 1 or more (or a bare -v) also reports the pod templates with nothing to do on stderr")
	fs.Lookup("v").NoOptDefVal = "1"
	hostPolicy := hostpolicy.DenyNodeLocal
	fs.Var(&hostPolicy, "probe-host-policy", "the nodes' probed --probe-host-policy (deny-node-local, pod-ips or kubelet): a probe whose host it refuses on every node stays with the kubelet")
	var gates probespec.APIServerGates
	fs.Var(&gates, "api-server-feature-gates", "the API server's gates of alpha probe fields that are on, as in its --feature-gates (H2CContainerProbe=true,GRPCContainerProbeTLS=true); a probe setting a field whose gate is off (the default) stays with the kubelet, as the API server would drop the field")
	usage := func(w io.Writer) {
		fmt.Fprintf(w, `Usage: %[1]s [--check] [-w] [-v] [--probe-host-policy=P] [--api-server-feature-gates=G] [file...]

Moves the livenessProbe, readinessProbe and startupProbe of every pod template
(Pod, Deployment, StatefulSet, DaemonSet, ReplicaSet, Job, CronJob,
ReplicationController, PodTemplate, the items of a List, and any object with
a pod template at spec.template, spec.jobTemplate.spec.template or template,
such as a CloneSet or a Rollout) into the probed.io/probes annotation and adds
the probed.io/ready readiness gate, as the adoption webhook does. Everything
else in the YAML is left as it was; objects without a pod template are named
on stderr. A probe probed would not run as the kubelet does (docs/webhook.md
lists the cases) stays in the spec, and a line on stderr says which and why.
A probe in the annotation the daemon would refuse (InvalidProbe) stops it,
exit 2.
Reads stdin when no file is named (or the file is "-"), writes stdout.

  %[1]s < deploy.yaml > deploy.probed.yaml

Flags:
%[2]s`, c.Name, fs.FlagUsages())
	}
	if err := cliflags.ParseWithArgs(fs, args); err != nil {
		return cliflags.Exit(err, fs, usage, c.Stdout, c.Stderr)
	}
	files := fs.Args()
	if *write && (len(files) == 0 || slices.Contains(files, "-")) {
		fmt.Fprintf(c.Stderr, "%s: -w needs file names (it cannot write back to stdin)\n", c.Name)
		return ExitError
	}
	if len(files) == 0 {
		files = []string{"-"}
	}

	inputs, failed := c.convertAll(files, convert.Options{HostPolicy: hostPolicy, APIServerGates: gates})
	if failed {
		return ExitError
	}
	changed := false
	for _, in := range inputs {
		for _, o := range in.res.Objects {
			changed = changed || o.Changed()
			if verbosity >= 1 || o.Skipped != "" || (*check && o.Changed()) {
				fmt.Fprintf(c.Stderr, "%s: %s\n", in.name, describe(o, *check))
			}
			if o.Skipped == "" {
				for _, l := range o.Adoption.Left {
					fmt.Fprintf(c.Stderr, "%s: document %d, %s (%s): %s\n", in.name, o.Document, o.Object, o.Template, l)
				}
			}
		}
		for _, d := range in.res.Reemitted {
			fmt.Fprintf(c.Stderr, "%s: document %d is in flow style (JSON or {…}): it was written out anew, with its comments and key order but not its layout\n", in.name, d)
		}
	}
	switch {
	case *check:
		if changed {
			return ExitChanged
		}
		return ExitOK
	case *write:
		for _, in := range inputs {
			if !bytes.Equal(in.src, in.res.Output) {
				if err := writeFile(in.name, in.res.Output, in.mode); err != nil {
					fmt.Fprintf(c.Stderr, "%s: %v\n", c.Name, err)
					return ExitError
				}
			}
		}
		return ExitOK
	}
	outputs := make([][]byte, 0, len(inputs))
	for _, in := range inputs {
		outputs = append(outputs, in.res.Output)
	}
	if _, err := c.Stdout.Write(convert.Concat(outputs)); err != nil {
		fmt.Fprintf(c.Stderr, "%s: %v\n", c.Name, err)
		return ExitError
	}
	return ExitOK
}

// convertAll reads and converts every input, reporting every error.
func (c Command) convertAll(files []string, o convert.Options) ([]input, bool) {
	var inputs []input
	failed := false
	for _, f := range files {
		in := input{name: f}
		var err error
		if f == "-" {
			in.name = "stdin"
			in.src, err = io.ReadAll(c.Stdin)
		} else {
			var st os.FileInfo
			if st, err = os.Stat(f); err == nil {
				in.mode = st.Mode().Perm()
				in.src, err = os.ReadFile(f)
			}
		}
		if err != nil {
			fmt.Fprintf(c.Stderr, "%s: %v\n", c.Name, err)
			failed = true
			continue
		}
		if in.res, err = convert.ConvertWith(in.src, o); err != nil {
			// One line per document that failed (ConvertWith joins them).
			errs := []error{err}
			if j, ok := err.(interface{ Unwrap() []error }); ok {
				errs = j.Unwrap()
			}
			for _, e := range errs {
				fmt.Fprintf(c.Stderr, "%s: %s: %v\n", c.Name, in.name, e)
			}
			failed = true
			continue
		}
		inputs = append(inputs, in)
	}
	return inputs, failed
}

// describe says in one line what converting a template did (or would do).
func describe(o convert.Object, would bool) string {
	if o.Template == "" {
		return fmt.Sprintf("document %d (line %d), %s: skipped: %s", o.Document, o.Line, o.Object, o.Skipped)
	}
	where := fmt.Sprintf("document %d, %s (%s)", o.Document, o.Object, o.Template)
	if o.Skipped != "" {
		return where + ": skipped: " + o.Skipped
	}
	if !o.Changed() {
		return where + ": nothing to do"
	}
	verb := func(s string) string {
		if would {
			return "would " + s
		}
		return s
	}
	var parts []string
	if len(o.Adoption.Moved) > 0 {
		parts = append(parts, verb("move")+" "+strings.Join(o.Adoption.Moved, ", ")+" into the annotation")
	}
	if len(o.Adoption.Kept) > 0 {
		parts = append(parts, verb("drop")+" "+strings.Join(o.Adoption.Kept, ", ")+" (the annotation's entries win)")
	}
	if o.Adoption.GateAdded {
		parts = append(parts, verb("add")+" the readiness gate")
	}
	return where + ": " + strings.Join(parts, "; ")
}

// writeFile replaces name by a file with data, through a rename.
func writeFile(name string, data []byte, mode os.FileMode) error {
	tmp, err := os.CreateTemp(filepath.Dir(name), "."+filepath.Base(name)+".probed-*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(data); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Chmod(mode); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), name)
}

// level is -v: a number, as kubectl's -v=N, or bare (-v) for 1.
type level int

func (l *level) String() string { return strconv.Itoa(int(*l)) }

func (l *level) Set(s string) error {
	n, err := strconv.Atoi(s)
	if err != nil || n < 0 {
		return fmt.Errorf("want a level, 0 or more: %q", s)
	}
	*l = level(n)
	return nil
}

// Type implements pflag.Value.
func (l *level) Type() string { return "int" }
