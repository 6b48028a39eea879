package hostpolicy

import (
	"testing"

	"go.uber.org/goleak"
)

// A Guard's Run refreshes the node's addresses until its context ends.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}
