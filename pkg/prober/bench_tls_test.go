//go:build linux

package prober

import (
	"fmt"
	"syscall"
	"testing"
	"time"

	"github.com/probed-dev/probed/pkg/probespec"
)

// BenchmarkHTTPSProbe: what probed.io/tls costs an HTTPS probe. On one
// loopback server (HTTP/2, an ECDSA P-256 certificate for probe.test),
// "unverified" is the kubelet's TLS (no probed.io/tls: the shared
// Transport, or the worker's with keep-alive) and "verified" checks the
// server against the pod's CA file with a server name, which costs a stat
// of that file per probe besides the chain's verification. With keep-alive
// off every probe makes a handshake; with it on, only the first.
//
// cpu-ns/probe is the process's CPU time (user and system, every thread,
// the in-process server's and the garbage collector's included) over the
// run, per probe.
func BenchmarkHTTPSProbe(b *testing.B) {
	ca := newTestCA(b, "bench CA")
	files := newPodTLSFiles(b)
	files.write(b, ca, nil)
	srv := startTLSServer(b, "https", serverTLS{cert: ca.server(b, time.Now().Add(time.Hour), tlsTestName)})
	p := New(nil, Options{TLS: TLSOptions{PodFiles: files.dir()}})
	spec := tlsProbeSpec("https", srv.port, true)
	verified := &probespec.TLS{ServerName: tlsTestName, CA: podCAFile}
	for _, keep := range []bool{false, true} {
		for _, tc := range []struct {
			name string
			tls  *probespec.TLS
		}{{"unverified", nil}, {"verified", verified}} {
			b.Run(fmt.Sprintf("%s/keepAlive=%v", tc.name, keep), func(b *testing.B) {
				c0 := processCPU()
				benchProbeWith(b, p, spec, Target{PodIP: "127.0.0.1", PodUID: tlsTestUID, TLS: tc.tls, KeepAlive: keep})
				b.ReportMetric(float64(processCPU()-c0)/float64(b.N), "cpu-ns/probe")
			})
		}
	}
}

// processCPU is the process's user and system CPU time in nanoseconds.
func processCPU() int64 {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return ru.Utime.Nano() + ru.Stime.Nano()
}
