package nodeinfo

import (
	"testing"

	"go.uber.org/goleak"
)

// FollowKubeletVersion runs an informer until its context ends.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}
