package containerd

import (
	"testing"

	"github.com/probed-dev/probed/pkg/cri/internal/critest"
)

func TestMain(m *testing.M) { critest.VerifyTestMain(m) }
