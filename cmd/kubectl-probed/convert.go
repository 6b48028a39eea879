package main

import (
	"io"

	"github.com/spf13/cobra"

	"github.com/probed-dev/probed/internal/convertcli"
)

// convertFunc runs `probed convert` with its arguments and returns its exit
// code.
type convertFunc func(args []string, in io.Reader, out, errOut io.Writer) int

// probedConvert is what main runs: probed convert's own code.
func probedConvert(args []string, in io.Reader, out, errOut io.Writer) int {
	return convertcli.Command{Name: "kubectl probed convert", Stdin: in, Stdout: out, Stderr: errOut}.Run(args)
}

func newConvert(o *options) *cobra.Command {
	return &cobra.Command{
		Use:   "convert [--check] [-w] [-v] [--probe-host-policy=P] [file...]",
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
