package kill

import (
	"testing"

	"go.uber.org/goleak"
)

// A preStop hook runs in a goroutine of its own: none may outlive its kill.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}
