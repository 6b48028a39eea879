// Module benchkit is the measurement core shared by the benchmark drivers of
// probed (test/bench) and of the kubelet (test/bench/kubelet). It uses the
// standard library only, so that depending on it changes neither driver's
// dependency versions: each prober is built exactly with its own go.mod.
module github.com/probed-dev/probed/test/bench/benchkit

go 1.24.0
