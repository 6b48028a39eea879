package netns_test

import (
	"testing"

	"go.uber.org/goleak"
)

// Every socket is made on a goroutine that is joined before the call
// returns.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}
