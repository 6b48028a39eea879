package worker

import (
	"sync"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/probed-dev/probed/pkg/prober"
)

// tlsExpiry exposes, for every live worker whose probe has probed.io/tls,
// when the certificates its last handshake depended on expire:
//
//	probed_probe_certificate_expiry_timestamp_seconds{probe_type,container,pod,namespace,certificate}
//
// certificate is "server" (the one the probe verified, or accepted under
// insecureSkipVerify) or "client" (the pod's, which it presented). The
// samples are read from the workers' sessions at scrape time, so a
// rotated certificate shows from its first handshake on, and a worker's
// series go when it ends.
type tlsExpiry struct {
	desc *prometheus.Desc
	mu   sync.Mutex
	live map[*series]*prober.Session
}

func newTLSExpiry() *tlsExpiry {
	return &tlsExpiry{
		desc: prometheus.NewDesc("probed_probe_certificate_expiry_timestamp_seconds",
			"When a certificate that a probe with probed.io/tls depends on expires (Unix time), from its last TLS handshake: the server's, or the client certificate it presented.",
			[]string{"probe_type", "container", "pod", "namespace", "certificate"}, nil),
		live: map[*series]*prober.Session{},
	}
}

// watchTLS adds a worker's session to the metric; unwatchTLS removes it.
func (m *Metrics) watchTLS(s *series, sess *prober.Session) {
	if m == nil || sess == nil {
		return
	}
	m.tlsExpiry.mu.Lock()
	m.tlsExpiry.live[s] = sess
	m.tlsExpiry.mu.Unlock()
}

func (m *Metrics) unwatchTLS(s *series) {
	if m == nil {
		return
	}
	m.tlsExpiry.mu.Lock()
	delete(m.tlsExpiry.live, s)
	m.tlsExpiry.mu.Unlock()
}

func (t *tlsExpiry) Describe(ch chan<- *prometheus.Desc) { ch <- t.desc }

func (t *tlsExpiry) Collect(ch chan<- prometheus.Metric) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for s, sess := range t.live {
		p := sess.TLSPeer()
		if p == nil {
			continue
		}
		emit := func(which string, at float64) {
			ch <- prometheus.MustNewConstMetric(t.desc, prometheus.GaugeValue, at, s.lv[0], s.lv[1], s.lv[2], s.lv[3], which)
		}
		emit("server", float64(p.NotAfter.Unix()))
		if !p.ClientNotAfter.IsZero() {
			emit("client", float64(p.ClientNotAfter.Unix()))
		}
	}
}
