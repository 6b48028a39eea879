package probespec

import "testing"

func TestAPIServerGatesFlag(t *testing.T) {
	var g APIServerGates
	if err := g.Set("H2CContainerProbe=true, GRPCContainerProbeTLS=false"); err != nil {
		t.Fatal(err)
	}
	if !g.H2CContainerProbe || g.GRPCContainerProbeTLS || g.String() != "H2CContainerProbe=true" {
		t.Errorf("gates %+v, %q", g, g.String())
	}
	for _, bad := range []string{"H2CContainerProbe", "H2CContainerProbe=maybe", "SomethingElse=true"} {
		if err := (&APIServerGates{}).Set(bad); err == nil {
			t.Errorf("Set(%q) = nil, want an error", bad)
		}
	}
}
