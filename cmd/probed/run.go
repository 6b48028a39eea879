package main

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	v1 "k8s.io/api/core/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	"github.com/probed-dev/probed/internal/daemon"
	"github.com/probed-dev/probed/pkg/cri"
	"github.com/probed-dev/probed/pkg/cri/connect"
	"github.com/probed-dev/probed/pkg/cri/decorator"
	"github.com/probed-dev/probed/pkg/cri/none"
	"github.com/probed-dev/probed/pkg/endpoints"
	"github.com/probed-dev/probed/pkg/hostpolicy"
	"github.com/probed-dev/probed/pkg/kill"
	"github.com/probed-dev/probed/pkg/kubeclient"
	"github.com/probed-dev/probed/pkg/lifecycle"
	"github.com/probed-dev/probed/pkg/manager"
	"github.com/probed-dev/probed/pkg/nodeinfo"
	"github.com/probed-dev/probed/pkg/podfiles"
	"github.com/probed-dev/probed/pkg/podinformer"
	"github.com/probed-dev/probed/pkg/prober"
	"github.com/probed-dev/probed/pkg/probespec"
	"github.com/probed-dev/probed/pkg/reachpolicy"
	"github.com/probed-dev/probed/pkg/shadow"
	"github.com/probed-dev/probed/pkg/status"
	"github.com/probed-dev/probed/pkg/version"
	"github.com/probed-dev/probed/pkg/worker"
)

// run wires probed's parts together and blocks until ctx ends. It holds no
// logic of its own.
func run(ctx context.Context, o *options) error {
	klog.InfoS("Starting probed", "version", version.Version, "revision", version.Revision, "node", o.NodeName, "statusMode", o.StatusMode,
		"probeSource", o.ProbeSource, "dryRun", o.DryRun, "livenessAction", o.LivenessAction,
		"probeHostPolicy", o.ProbeHostPolicy, "trustPodStatusIPs", o.TrustPodStatusIPs, "livenessRestartBudget", o.LivenessRestartBudget,
		"livenessWorkloadGuard", o.LivenessWorkloadGuard, "livenessWorkloadGuardMaxPause", o.LivenessWorkloadGuardMaxPause,
		"podVolumesDir", o.PodVolumesDir, "podSource", o.PodSource)
	start := time.Now()
	cfg, err := daemon.RESTConfig("probed", o.Kubeconfig, o.KubeAPIQPS, o.KubeAPIBurst)
	if err != nil {
		return err
	}
	// Events and the endpoints' reviews get clients, and rate limits, of
	// their own: neither an event storm nor made-up bearer tokens may delay
	// status writes.
	clients, err := newAPIClients(cfg, o)
	if err != nil {
		return err
	}
	client, eventClient := clients.status, clients.events
	if err := checkNodeClaim(ctx, client, o.NodeName); err != nil {
		return err
	}

	reg := prometheus.NewRegistry()
	metrics := newDaemonMetrics(reg, o)

	runtime, err := newRuntime(ctx, o, metrics.runtime)
	if err != nil {
		return err
	}
	defer runtime.Close()
	runtimeHealth := decorator.NewHealth(runtime, 0, 0, nil, reg)

	podInformer, err := newPodSource(ctx, o, client, metrics.podSource)
	if err != nil {
		return err
	}
	defer podInformer.close()
	// The manager, its workers and the status writer look pods up here.
	pods, err := podinformer.NewByUID(podInformer)
	if err != nil {
		return err
	}

	hostGuard := hostpolicy.NewGuard(o.ProbeHostPolicy, hostpolicy.GuardOptions{
		NodeAddrs: nodeinfo.Addresses(client, o.NodeName),
	})
	// The kubelet's User-Agent carries its own version: follow the node's,
	// from start and through an in-place upgrade of its kubelet.
	userAgent := prober.NewUserAgent(o.ProbeUserAgent)
	if o.ProbeUserAgent == "" {
		userAgent.Set(nodeinfo.UserAgentVersion(ctx, client, o.NodeName, prober.DefaultUserAgentVersion))
	}

	// The restart guard: a node-wide budget and the per-workload guard in
	// front of the runtime killer, when probed restarts containers at all.
	restartMetrics := metrics.restart
	var workloads *kill.Workloads
	if o.LivenessWorkloadGuard && !o.DryRun && o.LivenessAction == livenessRestart {
		owned, err := kill.IndexByController(podInformer)
		if err != nil {
			return err
		}
		workloads = kill.NewWorkloads(owned, restartMetrics, o.LivenessWorkloadGuardMaxPause, clock.RealClock{})
	}

	var recorder worker.Recorder
	var nodeRecorder record.EventRecorder
	var killer kill.Killer
	// --pdb-restarts: the PDB gate and the informer of PDBs it reads.
	var disruptions *kill.DisruptionBudgets
	var pdbInformer cache.SharedIndexInformer
	if !o.DryRun {
		broadcaster := record.NewBroadcaster(record.WithContext(ctx))
		broadcaster.StartStructuredLogging(3)
		broadcaster.StartRecordingToSink(kubeclient.EventSink{Client: eventClient})
		defer broadcaster.Shutdown()
		nodeRecorder = broadcaster.NewRecorder(client.Scheme(), v1.EventSource{Component: "probed", Host: o.NodeName})
		recorder = containerRecorder{Recorder: nodeRecorder}
		// A preStop hook is part of a kill: it never queues behind probes.
		hooks := lifecycle.New(runtime.Uncapped(), lifecycle.Options{UserAgent: userAgent, HostGuard: hostGuard, Recorder: recorder})
		killer = &kill.RuntimeKiller{Runtime: runtime, Hooks: hooks, Recorder: recorder, EventOnly: o.LivenessAction == livenessEventOnly}
		if o.LivenessAction == livenessRestart {
			guard := &kill.Guard{
				Inner:     killer,
				Budget:    kill.NewBudget(o.LivenessRestartBudget, clock.RealClock{}),
				Workloads: workloads,
				Recorder:  recorder,
				Metrics:   restartMetrics,
			}
			if o.PDBRestarts {
				if disruptions, pdbInformer, err = disruptionBudgets(client, o, pods); err != nil {
					return err
				}
				guard.Disruptions = disruptions
			}
			killer = guard
		}
	}
	var liveness worker.LivenessTracker
	if workloads != nil {
		liveness = workloads
	}

	var mgr *manager.Manager
	writer, err := status.NewWriter(status.Options{
		Client:  client,
		Pods:    pods,
		Mode:    o.StatusMode,
		DryRun:  o.DryRun,
		Resync:  o.StatusResync,
		Metrics: metrics.status,
	})
	if err != nil {
		return err
	}
	// Probe edits are left to the probe-reach policy only while it is in
	// force: the checker says when it is not, and the manager then holds
	// each pod's probes to what they reached when it first saw the pod.
	var reach *reachpolicy.Checker
	var reachPolicy manager.ReachPolicy
	if o.ProbeReachPolicy != "" {
		reach, err = reachpolicy.New(reachpolicy.Options{Client: client, Policy: o.ProbeReachPolicy, Node: o.NodeName,
			RequireApproval: o.RequireApprovedReach, Recorder: nodeRecorder, Registry: reg, Clock: clock.RealClock{},
			OnChange: func() { mgr.ResyncAll() }})
		if err != nil {
			return err
		}
		reachPolicy = reach
	}
	reachRecorder := status.NewReachRecorder(client, o.DryRun)

	// The host policy allows the IPs the runtime gave a pod's sandbox as
	// the pod's own; status.podIPs only with --trust-pod-status-ips.
	var sandboxIPs worker.SandboxIPSource
	if o.RuntimeType != cri.TypeNone {
		sandboxIPs = runtime
	} else if !o.TrustPodStatusIPs && o.ProbeHostPolicy != hostpolicy.Kubelet {
		klog.InfoS("No container runtime to say which IPs a pod has: the probe host policy allows no pod IP as the pod's own (see --trust-pod-status-ips)")
	}
	mgr, err = manager.New(manager.Options{
		Informer: podInformer,
		Pods:     pods,
		Source:   o.ProbeSource,
		Prober: prober.New(runtime, prober.Options{UserAgent: userAgent, HostGuard: hostGuard, TCPClose: o.TCPProbeClose,
			TLS: prober.TLSOptions{PodFiles: podfiles.New(o.PodVolumesDir), ClusterCAFile: cfg.CAFile, ClusterCAData: cfg.CAData}}),
		Killer:    killer,
		HostGuard: hostGuard,
		Liveness:  liveness,
		Recorder:  recorder,
		Status:    writer,
		Seeds:     status.SeedsFor(o.StatusMode),
		// In container-status mode probed writes ready itself; no gate.
		RequireReadinessGate: o.StatusMode == status.ModeConditions,
		WorkerMetrics:        metrics.workers,
		Metrics:              metrics.manager,
		Clock:                clock.RealClock{},
		DaemonStart:          start,
		// Off by default: one more event per flip, beside Unhealthy.
		ResultChangeEvents:   o.ProbeResultChangeEvents,
		RequireApprovedReach: o.RequireApprovedReach,
		// What the runtime says of a pod's IPs, unless told to trust its status.
		SandboxIPs:        sandboxIPs,
		TrustPodStatusIPs: o.TrustPodStatusIPs,
		ReachPolicy:       reachPolicy,
		ReachRecorder:     reachRecorder,
	})
	if err != nil {
		return err
	}

	// /metrics and /debug/ ask the API server who may read them.
	auth, err := endpointAuth(clients, o)
	if err != nil {
		return err
	}
	cert, caPublisher, err := servingCert(o, client)
	if err != nil {
		return err
	}

	// Shutdown order: stop the workers first, then let the writer flush what
	// they last decided; nothing is flipped on the way out.
	mgrCtx, stopManager := context.WithCancel(context.Background())
	writerCtx, stopWriter := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	informerDone := make(chan struct{})
	go func() { defer close(informerDone); podInformer.RunWithContext(mgrCtx) }()
	if pdbInformer != nil {
		wg.Add(2)
		go func() { defer wg.Done(); pdbInformer.RunWithContext(mgrCtx) }()
		go func() { defer wg.Done(); disruptions.Run(mgrCtx, disruptionReleasePeriod) }()
	}
	wg.Add(4)
	go func() { defer wg.Done(); hostGuard.Run(mgrCtx) }()
	go func() { defer wg.Done(); runtimeHealth.Run(mgrCtx) }()
	go func() { defer wg.Done(); writer.Run(writerCtx) }()
	wg.Add(1)
	go func() { defer wg.Done(); reachRecorder.Run(writerCtx) }()
	if reach != nil {
		wg.Add(1)
		go func() { defer wg.Done(); reach.Run(mgrCtx) }()
	}
	if o.ProbeUserAgent == "" {
		wg.Add(1)
		go func() { defer wg.Done(); nodeinfo.FollowKubeletVersion(mgrCtx, client, o.NodeName, userAgent) }()
	}
	if caPublisher != nil {
		wg.Add(1)
		go func() { defer wg.Done(); caPublisher.Run(mgrCtx) }()
	}
	// Shadow mode: the kubelet runs the same probes; say where it decided
	// otherwise (the metrics stay 0 elsewhere).
	if o.DryRun && o.ProbeSource == probespec.ProbeSourceSpec {
		comparer := shadow.New(shadow.Options{Desired: writer, Metrics: metrics.shadow,
			Pods: pods})
		wg.Add(1)
		go func() { defer wg.Done(); comparer.Run(mgrCtx) }()
	}
	managerDone := make(chan struct{})
	go func() { defer wg.Done(); defer close(managerDone); mgr.Run(mgrCtx) }()

	serveErr := make(chan error, 1)
	go func() {
		serveErr <- endpoints.Serve(ctx, endpoints.Options{
			Addr:       o.MetricsAddr,
			HealthAddr: o.HealthAddr,
			Gatherer:   reg,
			Auth:       auth,
			Insecure:   o.MetricsInsecure,
			Cert:       cert,
			Ready: []endpoints.Check{
				{Name: "informer-synced", Fn: podInformer.check},
				// Unready only after a sustained outage, not on a blip.
				{Name: "runtime", Fn: runtimeHealth.Check},
				{Name: "pdb-informer-synced", Fn: func(context.Context) error {
					if pdbInformer != nil && !pdbInformer.HasSynced() {
						return errors.New("PodDisruptionBudget informer has not synced (--pdb-restarts)")
					}
					return nil
				}},
			},
			Probes: mgr.Snapshots,
		})
	}()

	var runErr error
	select {
	case <-ctx.Done():
		klog.InfoS("Shutting down")
	case runErr = <-serveErr:
		if runErr == nil {
			runErr = errors.New("endpoints server stopped")
		}
	}
	stopManager()
	<-managerDone
	stopWriter()
	wg.Wait()
	<-informerDone
	return runErr
}

// eventConfig is cfg with the events client's own rate limit.
func eventConfig(cfg *rest.Config, o *options) *rest.Config {
	ec := rest.CopyConfig(cfg)
	ec.QPS, ec.Burst = float32(o.EventQPS), o.EventBurst
	ec.RateLimiter = nil
	return ec
}

// newRuntime connects to the container runtime behind the owner check and
// the exec cap. A runtime
// that cannot be told apart at start falls back to the native client, which
// connects lazily; /readyz reports it until it answers.
func newRuntime(ctx context.Context, o *options, m *decorator.Metrics) (*decorator.Limited, error) {
	if o.RuntimeType == cri.TypeNone {
		klog.InfoS("No container runtime: exec probes and container stops are refused")
		return decorator.NewLimitedWith(none.None(), limitOptions(o, m)), nil
	}
	opts := cri.Options{Endpoint: o.RuntimeEndpoint, Namespace: o.ContainerdNS, Type: string(o.RuntimeType)}
	rt, err := connect.New(ctx, opts)
	if err != nil && o.RuntimeType == cri.TypeAuto {
		klog.ErrorS(err, "Could not detect the runtime; using the containerd client until it answers", "endpoint", o.RuntimeEndpoint)
		opts.Type = cri.TypeNative
		rt, err = connect.New(ctx, opts)
	}
	if err != nil {
		return nil, fmt.Errorf("container runtime: %w", err)
	}
	// Execs and stops reach only the container the probe serves, whatever
	// ID the pod's status names; under the cap, so hooks are checked too.
	verified, err := decorator.NewVerified(rt, m)
	if err != nil {
		return nil, err
	}
	l := decorator.NewLimitedWith(verified, limitOptions(o, m))
	if o.ExecShareRuns {
		l.ShareIdenticalExecs(clock.RealClock{})
	}
	return l, nil
}

// limitOptions are the exec slots' flags.
func limitOptions(o *options, m *decorator.Metrics) decorator.LimitOptions {
	hold := o.ExecSlotMaxHold
	if hold == 0 {
		hold = -1 // the flag's 0 is "no limit"
	}
	return decorator.LimitOptions{MaxConcurrent: o.MaxConcurrentExecs, PerPod: o.MaxConcurrentExecsPerPod, MaxHold: hold, Metrics: m}
}
