package main

import (
	"context"
	"encoding/pem"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/probed-dev/probed/pkg/prober"
	"github.com/probed-dev/probed/pkg/probespec"
	"github.com/probed-dev/probed/pkg/results"
	"github.com/probed-dev/probed/pkg/worker"
)

// runDocTLSWorker runs one real readiness worker with probed.io/tls (roots
// Cluster: the loopback server's own certificate) until the certificate
// expiry metric has its series, and returns what stops it.
func runDocTLSWorker(ctx context.Context, t *testing.T, m *worker.Metrics, reg prometheus.Gatherer) func() {
	t.Helper()
	srv := httptest.NewTLSServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	u, _ := url.Parse(srv.URL)
	port, _ := strconv.Atoi(u.Port())
	ca := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw})
	pod := &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "docs-tls", Namespace: "docs", UID: types.UID("docs-tls")},
		Spec:       v1.PodSpec{Containers: []v1.Container{{Name: "app"}}},
		Status: v1.PodStatus{Phase: v1.PodRunning, PodIP: "127.0.0.1", ContainerStatuses: []v1.ContainerStatus{{
			Name: "app", ContainerID: "containerd://docs-tls", Started: new(true),
			State: v1.ContainerState{Running: &v1.ContainerStateRunning{StartedAt: metav1.NewTime(time.Now().Add(-time.Hour))}},
		}}},
	}
	w := worker.New(worker.Config{
		PodUID: pod.UID, PodNamespace: pod.Namespace, PodName: pod.Name,
		Container: &pod.Spec.Containers[0], ProbeType: probespec.Readiness,
		Spec: &v1.Probe{ProbeHandler: v1.ProbeHandler{HTTPGet: &v1.HTTPGetAction{Port: intstr.FromInt(port), Scheme: v1.URISchemeHTTPS}},
			PeriodSeconds: 1, TimeoutSeconds: 1, SuccessThreshold: 1, FailureThreshold: 3},
		TLS:    &probespec.TLS{ServerName: "example.com", Roots: probespec.RootsCluster},
		Prober: prober.New(nil, prober.Options{TLS: prober.TLSOptions{ClusterCAData: ca}}),
		Pods:   onePod{pod}, Results: results.NewManager(),
		DaemonStart: time.Now().Add(-time.Hour), Metrics: m,
	})
	done := make(chan struct{})
	go func() { defer close(done); w.Run(ctx) }()
	stop := func() { w.Stop(); <-done; srv.Close() }
	err := wait.PollUntilContextCancel(ctx, 10*time.Millisecond, true, func(context.Context) (bool, error) {
		w.Trigger()
		mfs, err := reg.Gather()
		for _, mf := range mfs {
			if mf.GetName() == "probed_probe_certificate_expiry_timestamp_seconds" {
				return true, nil
			}
		}
		return false, err
	})
	if err != nil {
		stop()
		t.Fatalf("the TLS worker's handshake never reached its metric: %v", err)
	}
	return stop
}
