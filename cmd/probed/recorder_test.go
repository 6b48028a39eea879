package main

import (
	"strings"
	"testing"
	"unicode/utf8"
)

func TestCapEventMessage(t *testing.T) {
	short := "Readiness probe failed: HTTP probe failed with statuscode: 500"
	if got := capEventMessage(short); got != short {
		t.Errorf("a short message changed: %q", got)
	}
	// A multi-byte rune straddles the cap: the cut must not split it.
	long := strings.Repeat("a", maxEventMessageBytes-1) + "é" + strings.Repeat("b", 3<<20)
	got := capEventMessage(long)
	if len(got) > maxEventMessageBytes+64 {
		t.Errorf("capped message is %d bytes", len(got))
	}
	if !utf8.ValidString(got) {
		t.Error("capped message is not valid UTF-8")
	}
	if !strings.HasSuffix(got, "... (3145730 more bytes)") {
		t.Errorf("capped message ends %q", got[len(got)-40:])
	}
}
