package main

import (
	"strings"
	"testing"
)

func TestTCPProbeCloseOption(t *testing.T) {
	t.Setenv("NODE_NAME", "node-a")
	if o := parse(t); o.TCPProbeClose != "fin" || o.validate() != nil {
		t.Errorf("default --tcp-probe-close = %q, %v; want fin, valid", o.TCPProbeClose, o.validate())
	}
	if o := parse(t, "--tcp-probe-close=rst"); o.TCPProbeClose != "rst" || o.validate() != nil {
		t.Errorf("--tcp-probe-close=rst: %q, %v", o.TCPProbeClose, o.validate())
	}
	err := parseError("--tcp-probe-close=RST")
	if err == nil || !strings.Contains(err.Error(), "-tcp-probe-close") {
		t.Errorf("--tcp-probe-close=RST: %v; want an error naming the flag", err)
	}
}
