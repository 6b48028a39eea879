package main

import (
	"bytes"
	"strings"
	"testing"
)

// The daemon's flags still start the daemon; a word first runs a tool.
func TestSubcommandDispatch(t *testing.T) {
	for _, c := range []struct {
		args []string
		want bool
	}{
		{nil, false},
		{[]string{"--node-name=n", "--dry-run"}, false},
		{[]string{"-v=3"}, false},
		{[]string{"convert"}, true},
		{[]string{"convert", "--check", "x.yaml"}, true},
	} {
		if got := isSubcommand(c.args); got != c.want {
			t.Errorf("isSubcommand(%q) = %v", c.args, got)
		}
	}
}

func TestConvertSubcommand(t *testing.T) {
	in := "apiVersion: v1\nkind: Pod\nmetadata:\n  name: p\nspec:\n  containers:\n  - name: app\n    livenessProbe:\n      tcpSocket: {port: 80}\n"
	var out, errs bytes.Buffer
	if code := runSubcommand("convert", nil, strings.NewReader(in), &out, &errs); code != 0 {
		t.Fatalf("exit %d: %s", code, errs.String())
	}
	if strings.Contains(out.String(), "livenessProbe:\n") || !strings.Contains(out.String(), `"livenessProbe": {"tcpSocket":{"port":80}}`) {
		t.Errorf("output:\n%s", out.String())
	}
	out.Reset()
	errs.Reset()
	if code := runSubcommand("conv", nil, strings.NewReader(in), &out, &errs); code != 2 || !strings.Contains(errs.String(), `unknown command "conv"`) {
		t.Errorf("unknown command: exit %d, stderr %q", code, errs.String())
	}
}
