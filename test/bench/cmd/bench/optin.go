package main

import (
	"encoding/json"

	"github.com/probed-dev/probed/test/bench/benchkit"
)

// probed's opt-in modes, measured against the kubelet runs of the same
// repetition: keep-alive ("probed.io/keepAlive": true) for HTTP and gRPC, and
// --tcp-probe-close=rst for TCP.
var optinEnv = map[string][]string{
	"http": {"PROBED_KEEPALIVE=1"},
	"grpc": {"PROBED_KEEPALIVE=1"},
	"tcp":  {"PROBED_TCP_CLOSE=rst"},
}

var optinName = map[string]string{"http": "HTTP keep-alive", "grpc": "gRPC keep-alive", "tcp": "TCP rst close"}

// runOptIn repeats figures 1–3 and 5 for probed's opt-in modes.
func (b *bench) runOptIn() error {
	b.res.Raw.OptIn, b.res.Raw.OptInTW = nil, nil
	for rep := 0; rep < b.cfg.Reps; rep++ {
		for _, proto := range b.protos {
			r, err := b.netRun("probed", proto, optinEnv[proto])
			if err != nil {
				return err
			}
			b.res.Raw.OptIn = append(b.res.Raw.OptIn, NetRun{Rep: rep, NetResult: *r})
			logf("optin rep %d %-15s: %.1fus cpu/probe, %.1f allocs %.0fB/probe, p99 %.0fus", rep, optinName[proto],
				r.Sat.CPUPerProbeUS, r.Allocs.AllocsPerProbe, r.Allocs.BytesPerProbe, r.Lat.Stats.P99US)

			res, err := b.runNetns(b.twSpec("probed", proto, optinEnv[proto]))
			if err != nil {
				return err
			}
			var rr benchkit.RateResult
			if err := json.Unmarshal(res[0].Out, &rr); err != nil {
				return err
			}
			b.res.Raw.OptInTW = append(b.res.Raw.OptInTW, TWRun{Rep: rep, RateResult: rr, TW: *res[0].TW})
			logf("optin rep %d %-15s: TIME_WAIT prober side %d, server side %d after %d probes", rep, optinName[proto],
				res[0].TW.ProberSide, res[0].TW.ServerSide, rr.Sent)
		}
	}
	return nil
}

// optinRows compare each opt-in mode with the kubelet's default runs.
func optinRows(raw *Raw) []Row {
	if len(raw.OptIn) == 0 {
		return nil
	}
	var rows []Row
	target := map[string]float64{"http": 0.6, "tcp": 0.6, "grpc": 0.1}
	for _, proto := range []string{"http", "tcp", "grpc"} {
		mk := func(f func(r *benchkit.NetResult) float64) *pairs {
			ps := newPairs()
			for i := range raw.OptIn {
				if raw.OptIn[i].Proto == proto {
					ps.add("probed", raw.OptIn[i].Rep, f(&raw.OptIn[i].NetResult))
				}
			}
			for i := range raw.Net {
				if raw.Net[i].Proto == proto && raw.Net[i].Impl == "kubelet" {
					ps.add("kubelet", raw.Net[i].Rep, f(&raw.Net[i].NetResult))
				}
			}
			return ps
		}
		fig := "9. Opt-in: " + optinName[proto]
		rows = append(rows, mk(func(r *benchkit.NetResult) float64 { return r.Sat.CPUPerProbeUS }).row(fig, "CPU per probe at saturation", "µs").ratioAtMost(target[proto]))
		rows = append(rows, mk(func(r *benchkit.NetResult) float64 { return r.Allocs.AllocsPerProbe }).row(fig, "allocations per probe", "allocs"))
		rows = append(rows, mk(func(r *benchkit.NetResult) float64 { return 1e6 / r.Sat.CPUPerProbeUS }).row(fig, "probes per prober CPU-second", "probes/s"))
		rows = append(rows, mk(func(r *benchkit.NetResult) float64 { return r.Lat.Stats.P99US / 1e3 }).row(fig, "latency p99", "ms"))
		tw := newPairs()
		for _, r := range raw.OptInTW {
			if r.Proto == proto {
				tw.add("probed", r.Rep, float64(r.TW.ProberSide))
			}
		}
		for _, r := range raw.TW {
			if r.Proto == proto && r.Impl == "kubelet" {
				tw.add("kubelet", r.Rep, float64(r.TW.ProberSide))
			}
		}
		rows = append(rows, tw.row(fig, "TIME_WAIT, prober side", "sockets"))
	}
	return rows
}
