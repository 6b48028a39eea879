package main

import (
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/probed-dev/probed/pkg/cri/decorator"
	"github.com/probed-dev/probed/pkg/kill"
	"github.com/probed-dev/probed/pkg/manager"
	"github.com/probed-dev/probed/pkg/podinformer"
	"github.com/probed-dev/probed/pkg/shadow"
	"github.com/probed-dev/probed/pkg/status"
	"github.com/probed-dev/probed/pkg/version"
	"github.com/probed-dev/probed/pkg/worker"
)

// daemonMetrics are the metrics probed registers at start, but for two
// gauges whose parts need a runtime or the API server to exist: the
// runtime's reachability (decorator.NewHealth) and the probe-reach policy's
// (reachpolicy.New). docs/observability.md's metric table is generated
// from these and those two (TestDocsMetrics).
type daemonMetrics struct {
	runtime *decorator.Metrics
	restart *kill.Metrics
	status  *status.Metrics
	workers *worker.Metrics
	manager *manager.Metrics
	// shadow stays at 0 outside shadow mode.
	shadow *shadow.Metrics
	// podSource: which source, and the kubelet's Pods API's errors.
	podSource *podinformer.Metrics
}

// newDaemonMetrics registers them with reg, as o's flags shape them.
func newDaemonMetrics(reg prometheus.Registerer, o *options) *daemonMetrics {
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	version.RegisterBuildInfo(reg, "probed")
	workerOpts := []worker.MetricsOption{worker.WithDurationSeries(o.MetricsProbeDuration)}
	if !o.MetricsPodUIDLabel {
		workerOpts = append(workerOpts, worker.WithoutPodUIDLabel())
	}
	return &daemonMetrics{
		runtime:   decorator.NewMetrics(reg),
		restart:   kill.NewMetrics(reg),
		status:    status.NewMetrics(reg),
		workers:   worker.NewMetrics(reg, workerOpts...),
		manager:   manager.NewMetrics(reg),
		shadow:    shadow.NewMetrics(reg),
		podSource: podinformer.NewMetrics(reg),
	}
}
