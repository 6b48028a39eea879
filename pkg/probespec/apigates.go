package probespec

import (
	"fmt"
	"sort"
	"strconv"
	"strings"
)

// APIServerGates are the API server's feature gates of alpha probe fields
// that adoption must know. With a gate off (the default in 1.37), the API
// server's PrepareForCreate drops the field after mutating admission, so
// the kubelet runs the probe without it; a probe moved into the annotation
// would keep it, and probed would run another probe. It is a flag.Value:
// "H2CContainerProbe=true,GRPCContainerProbeTLS=true".
type APIServerGates struct {
	// H2CContainerProbe (KEP-5999) keeps httpGet.protocol.
	H2CContainerProbe bool
	// GRPCContainerProbeTLS (KEP-4939) keeps grpc.mode.
	GRPCContainerProbeTLS bool
}

// gates names the fields of g, as the API server's --feature-gates does.
func (g *APIServerGates) gates() map[string]*bool {
	return map[string]*bool{
		"H2CContainerProbe":     &g.H2CContainerProbe,
		"GRPCContainerProbeTLS": &g.GRPCContainerProbeTLS,
	}
}

// Set parses "Name=bool,..." with the gates' names; an unknown name or a
// value that is not a boolean is an error.
func (g *APIServerGates) Set(s string) error {
	named := g.gates()
	for _, kv := range strings.Split(s, ",") {
		kv = strings.TrimSpace(kv)
		if kv == "" {
			continue
		}
		name, value, ok := strings.Cut(kv, "=")
		if !ok {
			return fmt.Errorf("%q: want Name=true or Name=false", kv)
		}
		gate, known := named[strings.TrimSpace(name)]
		if !known {
			return fmt.Errorf("unknown gate %q: want %s", name, strings.Join(g.names(), " or "))
		}
		on, err := strconv.ParseBool(strings.TrimSpace(value))
		if err != nil {
			return fmt.Errorf("%q: %w", kv, err)
		}
		*gate = on
	}
	return nil
}

func (g *APIServerGates) names() []string {
	var out []string
	for n := range g.gates() {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

// String is the gates that are on, as Set reads them.
func (g *APIServerGates) String() string {
	if g == nil {
		return ""
	}
	var on []string
	named := g.gates()
	for _, n := range g.names() {
		if *named[n] {
			on = append(on, n+"=true")
		}
	}
	return strings.Join(on, ",")
}

// Type names the value in pflag's usage.
func (g *APIServerGates) Type() string { return "gates" }
