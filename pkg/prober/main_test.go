package prober

import (
	"testing"

	"go.uber.org/goleak"
)

// Every probe opens and closes its own connections; a leaked goroutine here
// would be a leak per probe in the daemon.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}
