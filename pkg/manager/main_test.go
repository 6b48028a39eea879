package manager

import (
	"testing"

	"go.uber.org/goleak"
)

// Every worker, informer and queue a test starts must end with it.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}
