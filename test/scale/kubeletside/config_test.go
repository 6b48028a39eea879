//go:build scale

package kubeletside

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"
)

// config is the run's shape. It reads the scale harness's variables, so
// `make scale` gives both sides the same pods per node, storm and phases.
type config struct {
	// Pods is the number of site pods, the node's M (SCALE_PODS, default 30).
	Pods int `json:"sitePods"`
	// Storm is how long 10 % of the site pods fail every probe (SCALE_STORM).
	Storm time.Duration `json:"storm"`
	// Phases run after the steady window (SCALE_PHASES; default all:
	// transitions, kills, storm, restart, apiserver). restart restarts the
	// kubelet, the analog of the probed side's rolling restart.
	Phases map[string]bool `json:"phases"`
}

// maxPods is the kubelet's default pod limit.
const maxPods = 110

func loadConfig() (config, error) {
	c := config{Pods: 30, Storm: 60 * time.Second,
		Phases: map[string]bool{"transitions": true, "kills": true, "storm": true, "restart": true, "apiserver": true}}
	if v := os.Getenv("SCALE_PODS"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > maxPods {
			return c, fmt.Errorf("SCALE_PODS=%q: want 1 to %d", v, maxPods)
		}
		c.Pods = n
	}
	if v := os.Getenv("SCALE_STORM"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil {
			return c, fmt.Errorf("SCALE_STORM: %w", err)
		}
		c.Storm = d
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
	return c, nil
}

// sitePhases are the phases that run on the site pods.
func (c config) sitePhases() bool {
	return c.Phases["storm"] || c.Phases["restart"] || c.Phases["apiserver"]
}
