//go:build scale

package scale

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"
)

// config is the run's shape, from the environment. The defaults are the CI
// version; `make scale` (hack/scale.sh) sets the large one.
type config struct {
	// Nodes is the number of simulated nodes, each with its own probed (SCALE_NODES).
	Nodes int `json:"nodes"`
	// Pods is the number of pods per node (SCALE_PODS).
	Pods int `json:"podsPerNode"`
	// Steady is the quiet window whose writes must be 0 (SCALE_STEADY).
	Steady time.Duration `json:"steady"`
	// Storm is how long 10% of the pods fail every probe (SCALE_STORM).
	Storm time.Duration `json:"storm"`
	// Phases lists what runs after set-up and the steady window
	// (SCALE_PHASES, comma-separated: transitions, kills, storm, restart,
	// apiserver). The CI version runs only the rolling restart.
	Phases map[string]bool `json:"phases"`
	// Transitions is how many pods per node get their readiness flipped
	// false and back in the transitions phase (SCALE_TRANSITIONS).
	Transitions int `json:"transitionPodsPerNode"`
	// Kills is how many nodes get one liveness kill each (SCALE_KILLS).
	Kills int `json:"killNodes"`
	// ProbedFlags are extra flags for every probed (SCALE_PROBED_FLAGS, space-separated).
	ProbedFlags []string `json:"probedFlags"`
	// Out is where the JSON result goes (SCALE_OUT).
	Out string `json:"-"`
}

func loadConfig() (config, error) {
	c := config{
		Nodes: 10, Pods: 20, Steady: 30 * time.Second, Storm: 60 * time.Second,
		Phases:      map[string]bool{"restart": true},
		Transitions: 2, Kills: 10,
		// Status resync well inside the steady window, so the window
		// covers a few resyncs: they must compare, never write.
		ProbedFlags: []string{"--status-resync=10s"},
		Out:         "../../.cache/scale/short.json",
	}
	var err error
	ints := map[string]*int{"SCALE_NODES": &c.Nodes, "SCALE_PODS": &c.Pods, "SCALE_TRANSITIONS": &c.Transitions, "SCALE_KILLS": &c.Kills}
	for k, p := range ints {
		if v := os.Getenv(k); v != "" {
			if *p, err = strconv.Atoi(v); err != nil || *p < 0 {
				return c, fmt.Errorf("%s=%q: want a whole number", k, v)
			}
		}
	}
	durs := map[string]*time.Duration{"SCALE_STEADY": &c.Steady, "SCALE_STORM": &c.Storm}
	for k, p := range durs {
		if v := os.Getenv(k); v != "" {
			if *p, err = time.ParseDuration(v); err != nil {
				return c, fmt.Errorf("%s: %w", k, err)
			}
		}
	}
	if v, ok := os.LookupEnv("SCALE_PHASES"); ok {
		c.Phases = map[string]bool{}
		for _, p := range strings.Split(v, ",") {
			switch p = strings.TrimSpace(p); p {
			case "":
			case "transitions", "kills", "storm", "restart", "apiserver":
				c.Phases[p] = true
			default:
				return c, fmt.Errorf("SCALE_PHASES: unknown phase %q", p)
			}
		}
	}
	if v, ok := os.LookupEnv("SCALE_PROBED_FLAGS"); ok {
		c.ProbedFlags = strings.Fields(v)
	}
	if v := os.Getenv("SCALE_OUT"); v != "" {
		c.Out = v
	}
	if c.Nodes < 1 || c.Pods < 1 || c.Pods > 110 {
		return c, fmt.Errorf("SCALE_NODES=%d SCALE_PODS=%d: want at least 1 node and 1 to 110 pods per node", c.Nodes, c.Pods)
	}
	return c, nil
}
