package worker

import (
	"encoding/json"
	"time"
	"unicode/utf8"

	"github.com/probed-dev/probed/pkg/results"
)

const (
	// historySize is how many results /debug/probes shows per worker.
	historySize = 10
	// maxExcerptBytes caps the output kept per result: enough to recognise a
	// message, small enough that thousands of workers stay cheap.
	maxExcerptBytes = 256
)

// HistoryEntry is one probe attempt as shown on /debug/probes.
type HistoryEntry struct {
	// Time is when the probe started.
	Time time.Time
	// Result is "success", "failure" or "unknown"; "error" when the probe
	// could not run (its result was thrown away) or panicked.
	Result string
	// Duration is how long the probe took.
	Duration time.Duration
	// Output is the start of the probe's output, at most 256 bytes.
	Output string
	// Error is the error the prober returned, if any.
	Error string
}

// MarshalJSON writes the duration as a readable string ("12.5ms").
func (e HistoryEntry) MarshalJSON() ([]byte, error) {
	return json.Marshal(struct {
		Time     time.Time `json:"time"`
		Result   string    `json:"result"`
		Duration string    `json:"duration"`
		Output   string    `json:"output,omitempty"`
		Error    string    `json:"error,omitempty"`
	}{e.Time, e.Result, e.Duration.String(), e.Output, e.Error})
}

// history is a ring of the last historySize entries.
type history struct {
	buf  [historySize]HistoryEntry
	next int
	n    int
}

func (h *history) add(e HistoryEntry) {
	h.buf[h.next] = e
	h.next = (h.next + 1) % historySize
	if h.n < historySize {
		h.n++
	}
}

// list returns the entries oldest first.
func (h *history) list() []HistoryEntry {
	out := make([]HistoryEntry, 0, h.n)
	start := (h.next - h.n + historySize) % historySize
	for i := 0; i < h.n; i++ {
		out = append(out, h.buf[(start+i)%historySize])
	}
	return out
}

// excerpt cuts s to at most maxExcerptBytes without splitting a UTF-8 rune.
func excerpt(s string) string {
	if len(s) <= maxExcerptBytes {
		return s
	}
	cut := maxExcerptBytes
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut]
}

// resultWord is the lower-case spelling used on /debug/probes.
func resultWord(r results.Result) string {
	switch r {
	case results.Success:
		return "success"
	case results.Failure:
		return "failure"
	}
	return "unknown"
}
