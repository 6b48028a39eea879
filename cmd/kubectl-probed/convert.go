package main

import (
	"fmt"
	"io"

	"github.com/spf13/cobra"
)

// convertFunc runs `probed convert` with its arguments and returns its exit
// code.
type convertFunc func(args []string, in io.Reader, out, errOut io.Writer) int

// probedConvert is what main runs. TODO(issue 14): point it at pkg/convert
// once that is merged:
//
//	convert.Command{Name: "kubectl probed convert", Stdin: in, Stdout: out, Stderr: errOut}.Run(args)
func probedConvert(args []string, in io.Reader, out, errOut io.Writer) int {
	fmt.Fprintln(errOut, "kubectl probed convert: not in this build yet (it runs the same code as `probed convert`, which this branch does not have); use `probed convert` meanwhile")
	return 2
}

func newConvert(o *options) *cobra.Command {
	return &cobra.Command{
		Use:   "convert [--check] [-w] [-v] [file...]",
		Short: "Move spec probes into the probed.io/probes annotation (the same as probed convert)",
		// convert parses its own flags, as `probed convert` does.
		DisableFlagParsing: true,
		RunE: func(cmd *cobra.Command, args []string) error {
			if code := o.convert(args, o.streams.In, o.streams.Out, o.streams.ErrOut); code != 0 {
				return exitCode(code)
			}
			return nil
		},
	}
}
