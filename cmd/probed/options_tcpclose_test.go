package main

import (
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
	// A bad spelling is refused when parsed (TestOptionValidation).
}
