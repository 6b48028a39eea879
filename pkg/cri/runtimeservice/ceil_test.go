package runtimeservice

import (
	"testing"
	"time"
)

func TestCeilSeconds(t *testing.T) {
	for d, want := range map[int64]int64{0: 0, -1: 0, 1: 1, 999e6: 1, 1e9: 1, 1e9 + 1: 2, 30e9: 30} {
		if got := CeilSeconds(time.Duration(d)); got != want {
			t.Errorf("CeilSeconds(%d) = %d, want %d", d, got, want)
		}
	}
}
