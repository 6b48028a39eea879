package probespec

import (
	"time"

	"k8s.io/apimachinery/pkg/util/validation/field"
)

// Sub-second timing: probed's own fields, beside core/v1 Probe's, that
// replace periodSeconds and timeoutSeconds with milliseconds. Thresholds,
// initialDelaySeconds, on-hold and startup gating are unchanged; status is
// still written once per transition.
const (
	// PeriodMillisecondsField replaces periodSeconds.
	PeriodMillisecondsField = "probed.io/periodMilliseconds"
	// TimeoutMillisecondsField replaces timeoutSeconds.
	TimeoutMillisecondsField = "probed.io/timeoutMilliseconds"

	// MinPeriodMilliseconds bounds the probe rate: ten probes a second per
	// worker at most.
	MinPeriodMilliseconds = 100
	// minTimeoutMilliseconds: a timeout must leave a probe some time.
	minTimeoutMilliseconds = 1
)

// checkSubSecond validates the millisecond fields (nil: absent) and
// returns the period and timeout they set (0: the probe's seconds).
func checkSubSecond(period, timeout *int32, path *field.Path) (time.Duration, time.Duration, field.ErrorList) {
	var errs field.ErrorList
	var p, t time.Duration
	if period != nil {
		if *period < MinPeriodMilliseconds {
			errs = append(errs, field.Invalid(path.Child(PeriodMillisecondsField), *period, "must be at least 100"))
		}
		p = time.Duration(*period) * time.Millisecond
	}
	if timeout != nil {
		if *timeout < minTimeoutMilliseconds {
			errs = append(errs, field.Invalid(path.Child(TimeoutMillisecondsField), *timeout, "must be at least 1"))
		}
		t = time.Duration(*timeout) * time.Millisecond
	}
	if len(errs) > 0 {
		return 0, 0, errs
	}
	return p, t, nil
}

// PeriodDuration is how often d runs: probed.io/periodMilliseconds when set, else
// periodSeconds.
func (d DeclaredProbe) PeriodDuration() time.Duration {
	if d.Period > 0 {
		return d.Period
	}
	return time.Duration(d.Probe.PeriodSeconds) * time.Second
}
