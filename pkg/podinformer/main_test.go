package podinformer

import (
	"testing"

	"go.uber.org/goleak"
)

// Every informer, stream and watch goroutine a test starts ends with it.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}
