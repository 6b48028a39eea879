//go:build soak

package soak

import (
	"encoding/json"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"
)

// config is the soak's shape, from the environment (defaults: the full soak).
type config struct {
	// Duration is how long pods churn (SOAK_DURATION, default 20m).
	Duration time.Duration `json:"duration"`
	// Pods is the steady number of live pods, three probes each (SOAK_PODS).
	Pods int `json:"pods"`
	// Wave is the time between churn waves (SOAK_WAVE, default 30s).
	Wave time.Duration `json:"wave"`
	// ChurnFraction of the live pods is deleted and replaced every wave.
	ChurnFraction float64 `json:"churnFraction"`
	// FlipFraction of the live pods get their readiness target flipped every wave.
	FlipFraction float64 `json:"flipFraction"`
	// WarmupFraction of Duration, after the initial ramp, is excluded from
	// the RSS slope and the per-1,000-worker figures. Half: in the 20-minute
	// run RSS climbed for 8-10 minutes after the ramp as the Go heap grew to
	// its high-water mark, then stayed flat (docs/reliability/soak.md).
	WarmupFraction float64 `json:"warmupFraction"`
	// MaxRSSSlopeKiBPerMin bounds the post-warm-up RSS slope
	// (SOAK_MAX_RSS_SLOPE_KIB_MIN, default 1024).
	MaxRSSSlopeKiBPerMin float64 `json:"maxRSSSlopeKiBPerMin"`
	// MinSlopeWindow is the shortest post-warm-up window whose slope is
	// asserted; a shorter one (the CI version) is only reported, since a
	// minute of GC sawtooth says nothing about a trend.
	MinSlopeWindow time.Duration `json:"minSlopeWindow"`
	// Out is where the JSON summary goes (SOAK_OUT).
	Out string `json:"-"`
}

func loadConfig() (config, error) {
	c := config{
		Duration:             20 * time.Minute,
		Pods:                 2000,
		Wave:                 30 * time.Second,
		ChurnFraction:        0.10,
		FlipFraction:         0.05,
		WarmupFraction:       0.5,
		MaxRSSSlopeKiBPerMin: 1024,
		MinSlopeWindow:       5 * time.Minute,
		Out:                  "../../.cache/soak/result.json",
	}
	var err error
	if v := os.Getenv("SOAK_DURATION"); v != "" {
		if c.Duration, err = time.ParseDuration(v); err != nil {
			return c, fmt.Errorf("SOAK_DURATION: %w", err)
		}
	}
	if v := os.Getenv("SOAK_WAVE"); v != "" {
		if c.Wave, err = time.ParseDuration(v); err != nil {
			return c, fmt.Errorf("SOAK_WAVE: %w", err)
		}
	}
	if v := os.Getenv("SOAK_PODS"); v != "" {
		if c.Pods, err = strconv.Atoi(v); err != nil || c.Pods < 30 {
			return c, fmt.Errorf("SOAK_PODS=%q: want an integer ≥ 30", v)
		}
	}
	if v := os.Getenv("SOAK_MAX_RSS_SLOPE_KIB_MIN"); v != "" {
		if c.MaxRSSSlopeKiBPerMin, err = strconv.ParseFloat(v, 64); err != nil {
			return c, fmt.Errorf("SOAK_MAX_RSS_SLOPE_KIB_MIN: %w", err)
		}
	}
	if v := os.Getenv("SOAK_OUT"); v != "" {
		c.Out = v
	}
	return c, nil
}

// MarshalJSON writes durations as Go duration strings ("20m0s").
func (c config) MarshalJSON() ([]byte, error) {
	type plain config
	return json.Marshal(struct {
		plain
		Duration       string `json:"duration"`
		Wave           string `json:"wave"`
		MinSlopeWindow string `json:"minSlopeWindow"`
	}{plain(c), c.Duration.String(), c.Wave.String(), c.MinSlopeWindow.String()})
}

func TestConfigJSON(t *testing.T) {
	c, err := loadConfig()
	if err != nil {
		t.Fatal(err)
	}
	c.Duration = 20 * time.Minute
	b, err := json.Marshal(c)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(b), `"duration":"20m0s"`) || !strings.Contains(string(b), `"pods":`) {
		t.Errorf("config JSON = %s", b)
	}
}
