package worker

import (
	"encoding/json"
	"math"
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

// history is a ring of the last historySize entries, stored compactly (an
// idle worker's memory is mostly this) and expanded by list.
type history struct {
	buf  [historySize]histEntry
	next int32
	n    int32
}

type histEntry struct {
	at     int64  // unix nanoseconds
	text   string // the error (errLen bytes), then the output excerpt
	tookUS int32  // microseconds, capped at about 35 minutes
	errLen int16
	result int8
	failed bool // the prober errored or panicked
}

// add records one attempt; failed marks an errored one, with its error.
func (h *history) add(at time.Time, r results.Result, took time.Duration, output string, failed bool, err string) {
	e := &h.buf[h.next]
	*e = histEntry{at: at.UnixNano(), tookUS: int32(min(took/time.Microsecond, math.MaxInt32)), result: int8(r), failed: failed, text: output}
	if failed {
		e.text, e.errLen = err+output, int16(len(err))
	}
	h.next = (h.next + 1) % historySize
	if h.n < historySize {
		h.n++
	}
}

// list returns the entries oldest first.
func (h *history) list() []HistoryEntry {
	out := make([]HistoryEntry, 0, h.n)
	start := (h.next - h.n + historySize) % historySize
	for i := int32(0); i < h.n; i++ {
		e := &h.buf[(start+i)%historySize]
		he := HistoryEntry{Time: time.Unix(0, e.at), Result: resultWord(results.Result(e.result)), Duration: time.Duration(e.tookUS) * time.Microsecond, Output: e.text}
		if e.failed {
			he.Result, he.Error, he.Output = "error", e.text[:e.errLen], e.text[e.errLen:]
		}
		out = append(out, he)
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
