package main

import (
	"fmt"
	"io"
	"strings"

	"github.com/probed-dev/probed/internal/convertcli"
)

// isSubcommand reports whether probed's first argument names a subcommand
// rather than starting the daemon's flags.
func isSubcommand(args []string) bool {
	return len(args) > 0 && !strings.HasPrefix(args[0], "-")
}

// runSubcommand runs one of probed's tools and returns its exit code.
// Without a subcommand, probed is the daemon (see main).
func runSubcommand(name string, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	switch name {
	case "convert":
		return convertcli.Command{Name: "probed convert", Stdin: stdin, Stdout: stdout, Stderr: stderr}.Run(args)
	case "approved-reach":
		return approvedReach(args, stdin, stdout, stderr)
	}
	fmt.Fprintf(stderr, "probed: unknown command %q; the commands are: convert, approved-reach (or run the daemon with flags: probed --help)\n", name)
	return 2
}
