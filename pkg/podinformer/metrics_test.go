package podinformer

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

// The errors counter has its known codes at 0 from the start: a scrape
// shows the series before any error, whichever the source.
func TestErrorsCounterStartsAtZero(t *testing.T) {
	reg := prometheus.NewRegistry()
	m := NewMetrics(reg)
	if n := testutil.CollectAndCount(m.errors, "probed_pod_source_errors_total"); n != len(knownCodes) {
		t.Errorf("%d series, want %d", n, len(knownCodes))
	}
	if v := testutil.ToFloat64(m.errors.WithLabelValues("FailedPrecondition")); v != 0 {
		t.Errorf("FailedPrecondition = %v, want 0", v)
	}
}
