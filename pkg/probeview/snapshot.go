package probeview

import (
	"encoding/json"
	"fmt"
	"io"
	"time"
)

// Probe is one worker's entry on /debug/probes, as probed's
// worker.Snapshot encodes it. It is decoded here, not imported, so that the
// plugin does not link the daemon.
type Probe struct {
	PodNamespace string `json:"podNamespace"`
	PodName      string `json:"podName"`
	PodUID       string `json:"podUID"`
	Container    string `json:"container"`
	ProbeType    string `json:"probeType"`
	Spec         string `json:"spec"`
	State        string `json:"state"`
	ContainerID  string `json:"containerID,omitempty"`
	Published    string `json:"published,omitempty"`
	LastResult   string `json:"lastResult,omitempty"`
	ResultRun    int    `json:"resultRun"`
	// RestartDeferred: why the container's restart is held back, while it is.
	RestartDeferred string `json:"restartDeferred,omitempty"`
	// TLS is what the last TLS handshake of a probe with probed.io/tls
	// showed.
	TLS     *TLSPeer `json:"tls,omitempty"`
	History []Result `json:"history"`
}

// TLSPeer is probed's prober.TLSPeer: the server a probe with
// probed.io/tls last shook hands with, and the expiries it depends on.
type TLSPeer struct {
	ServerName     string    `json:"serverName,omitempty"`
	Verified       bool      `json:"verified"`
	Subject        string    `json:"subject,omitempty"`
	DNSNames       []string  `json:"dnsNames,omitempty"`
	Issuer         string    `json:"issuer,omitempty"`
	NotAfter       time.Time `json:"notAfter"`
	ClientNotAfter time.Time `json:"clientNotAfter,omitzero"`
	At             time.Time `json:"at"`
}

// Result is one probe attempt, oldest first in Probe.History.
type Result struct {
	Time time.Time `json:"time"`
	// Result is success, failure, unknown, or error (the probe could not
	// run, and its result was thrown away).
	Result   string   `json:"result"`
	Duration Duration `json:"duration"`
	Output   string   `json:"output,omitempty"`
	Error    string   `json:"error,omitempty"`
}

// Duration decodes the "12.5ms" strings probed writes.
type Duration time.Duration

// UnmarshalJSON parses a time.Duration string.
func (d *Duration) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return fmt.Errorf("duration: %w", err)
	}
	v, err := time.ParseDuration(s)
	if err != nil {
		return fmt.Errorf("duration: %w", err)
	}
	*d = Duration(v)
	return nil
}

// DecodeProbes reads a /debug/probes response body.
func DecodeProbes(r io.Reader) ([]Probe, error) {
	var out []Probe
	if err := json.NewDecoder(r).Decode(&out); err != nil {
		return nil, fmt.Errorf("decoding /debug/probes: %w", err)
	}
	return out, nil
}
