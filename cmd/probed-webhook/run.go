package main

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"golang.org/x/sync/errgroup"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"
	crmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
	"sigs.k8s.io/controller-runtime/pkg/metrics/filters"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	"sigs.k8s.io/controller-runtime/pkg/webhook"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/probed-dev/probed/internal/daemon"
	probedadmission "github.com/probed-dev/probed/pkg/admission"
	"github.com/probed-dev/probed/pkg/gatewatch"
	"github.com/probed-dev/probed/pkg/servingcert"
	"github.com/probed-dev/probed/pkg/version"
)

// Paths the webhook configurations call.
const (
	adoptPath    = "/adopt"
	validatePath = "/validate"
	approvePath  = "/approve-reach"
	// probeHostPath is called for namespaces that enforce Pod Security
	// baseline or restricted only (the configuration's namespaceSelector).
	probeHostPath = "/validate-probe-host"
)

// run wires the webhook's parts together and blocks until ctx ends. It
// holds no logic of its own.
func run(ctx context.Context, o *options) error {
	klog.InfoS("Starting probed-webhook", "version", version.Version, "namespace", o.Namespace,
		"manageCerts", o.ManageCerts, "gateMonitor", o.GateMonitor)
	ctrllog.SetLogger(klog.NewKlogr())
	cfg, err := daemon.RESTConfig("probed-webhook", o.Kubeconfig, o.KubeAPIQPS, o.KubeAPIBurst)
	if err != nil {
		return err
	}
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return fmt.Errorf("building the API client: %w", err)
	}
	// controller-runtime's registry: its webhook server's latency and
	// in-flight metrics are there, and its metrics server serves it.
	reg := crmetrics.Registry
	for _, c := range []prometheus.Collector{collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{})} {
		if err := reg.Register(c); err != nil && !errors.As(err, &prometheus.AlreadyRegisteredError{}) {
			return err
		}
	}

	g, ctx := errgroup.WithContext(ctx)
	tlsOpts := []func(*tls.Config){serveTLS}
	ready := []healthz.Checker{}
	if o.ManageCerts {
		rot, err := servingcert.New(servingcert.Options{
			Client: client, Clock: clock.RealClock{}, Namespace: o.Namespace, SecretName: o.SecretName,
			MutatingWebhookConfiguration: o.MutatingName, ValidatingWebhookConfiguration: o.ValidatingWHC,
			Config:   servingcert.Config{DNSNames: o.dnsNames(), CAValidity: o.CAValidity, CertValidity: o.CertValidity},
			Interval: o.CertInterval, Propagation: o.CAPropagation, Registerer: reg,
		})
		if err != nil {
			return err
		}
		tlsOpts = append(tlsOpts, func(c *tls.Config) { c.GetCertificate = rot.GetCertificate })
		ready = append(ready, func(r *http.Request) error { return rot.Ready(r.Context()) })
		g.Go(func() error { rot.Run(ctx); return nil })
	}

	host, port, _ := o.hostPort()
	server := webhook.NewServer(webhook.Options{Host: host, Port: port, CertDir: o.CertDir, TLSOpts: tlsOpts})
	metrics := registerMetrics(reg)
	scope := probedadmission.Scope{ExcludedNamespaces: o.excludedNamespaces(), OwnNames: probedadmission.DefaultOwnNames()}
	server.Register(adoptPath, &admission.Webhook{Handler: &probedadmission.Adopter{Scope: scope, HostPolicy: o.ProbeHostPolicy, APIServerGates: o.APIServerGates, Metrics: metrics}})
	server.Register(validatePath, &admission.Webhook{Handler: &probedadmission.Validator{ExcludedNamespaces: o.excludedNamespaces(), Metrics: metrics}})
	server.Register(probeHostPath, &admission.Webhook{Handler: &probedadmission.ProbeHostRefuser{ExcludedNamespaces: o.excludedNamespaces(), Metrics: metrics}})
	server.Register(approvePath, &admission.Webhook{Handler: &probedadmission.ReachApprover{ExcludedNamespaces: o.excludedNamespaces(),
		Access: probedadmission.SubjectAccessReviews{Client: client.AuthorizationV1().SubjectAccessReviews()}, Metrics: metrics}})
	ready = append(ready, server.StartedChecker())
	g.Go(func() error { return server.Start(ctx) })

	if o.GateMonitor {
		probed := o.probedPods()
		factory := informers.NewSharedInformerFactoryWithOptions(client, 0, informers.WithTransform(gatewatch.Strip(probed)))
		pods := factory.Core().V1().Pods()
		informer := pods.Informer()
		reg.MustRegister(gatewatch.New(gatewatch.Options{Pods: pods.Lister(), Synced: informer.HasSynced, Clock: clock.RealClock{}, Grace: o.GateGrace, Probed: probed}))
		factory.Start(ctx.Done())
		defer factory.Shutdown()
	}

	// "0" turns the metrics server off: NewServer then returns none.
	mo := metricsserver.Options{BindAddress: o.MetricsAddr, SecureServing: o.MetricsSecure, TLSOpts: []func(*tls.Config){serveTLS}}
	if o.MetricsSecure {
		mo.FilterProvider = filters.WithAuthenticationAndAuthorization
	}
	httpClient, err := rest.HTTPClientFor(cfg)
	if err != nil {
		return err
	}
	ms, err := metricsserver.NewServer(mo, cfg, httpClient)
	if err != nil {
		return err
	}
	if ms != nil {
		g.Go(func() error { return ms.Start(ctx) })
	}
	g.Go(func() error { return serveHealth(ctx, o.HealthAddr, ready) })
	return g.Wait()
}

// registerMetrics registers the admission handlers' metrics and the build
// info with reg; the certificates' gauge and the gate monitor's are
// registered by their parts (servingcert.New, gatewatch.New).
// docs/observability.md's table of the webhook's metrics is generated from
// these (TestDocsMetrics).
func registerMetrics(reg prometheus.Registerer) *probedadmission.Metrics {
	m := probedadmission.NewMetrics(reg)
	version.RegisterBuildInfo(reg, "probed_webhook")
	return m
}

// serveTLS is the TLS both servers offer: TLS 1.2 or newer, and HTTP/1.1
// only. controller-runtime offers HTTP/2 by default; the API server needs
// none of it, and turning it off removes the HTTP/2 class of attacks
// (rapid reset, CVE-2023-44487), as probed's own endpoints do.
func serveTLS(c *tls.Config) {
	c.MinVersion = tls.VersionTLS12
	c.NextProtos = []string{"http/1.1"}
}

// serveHealth serves /healthz (the process is up) and /readyz (every check
// passes) until ctx ends.
func serveHealth(ctx context.Context, addr string, checks []healthz.Checker) error {
	all := map[string]healthz.Checker{}
	for i, c := range checks {
		all[fmt.Sprintf("check-%d", i)] = c
	}
	mux := http.NewServeMux()
	mux.Handle("/healthz", healthz.CheckHandler{Checker: healthz.Ping})
	mux.Handle("/readyz", http.StripPrefix("/readyz", &healthz.Handler{Checks: all}))
	mux.Handle("/readyz/", http.StripPrefix("/readyz", &healthz.Handler{Checks: all}))
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("listening on %s: %w", addr, err)
	}
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go func() {
		<-ctx.Done()
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(sctx)
	}()
	klog.InfoS("Serving health checks", "address", ln.Addr().String())
	if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}
