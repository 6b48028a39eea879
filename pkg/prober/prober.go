package prober

import (
	"context"
	"errors"
	"fmt"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/klog/v2"

	"github.com/probed-dev/probed/pkg/hostpolicy"
	"github.com/probed-dev/probed/pkg/probespec"
	"github.com/probed-dev/probed/pkg/results"
)

// maxProbeRetries is how many times one probe runs when its handler errors
// (the kubelet's maxProbeRetries). A Failure is an answer and is not retried.
const maxProbeRetries = 3

// defaultTimeout applies when a spec reaches us without API defaulting.
const defaultTimeout = time.Second

// errNoPodNetns: a probe from inside the pod where probed cannot enter
// pods' network namespaces.
var errNoPodNetns = errors.New("probed.io/from Pod: probes from inside the pod are not enabled on this node (--pod-network-probes)")

// errNoHandler is returned for a probe with none of exec, httpGet, tcpSocket or grpc.
var errNoHandler = errors.New("missing probe handler")

// Prober runs single probes. It is safe for concurrent use by many workers;
// everything it holds (transports, options) is shared and immutable, but
// for the User-Agent version, which follows the node's kubelet.
type Prober struct {
	runner CommandRunner
	http   *httpProber
	tcp    *tcpProber
	grpc   *grpcProber
	guard  *hostpolicy.Guard
}

// New returns a Prober. runner carries out exec probes; it may be nil when
// no exec probe will run, in which case exec probes error.
func New(runner CommandRunner, opts Options) *Prober {
	tlsSrc := &tlsSource{opts: opts.TLS}
	return &Prober{
		runner: runner,
		http:   newHTTPProber(opts.UserAgent, opts.HostGuard, tlsSrc),
		tcp:    &tcpProber{guard: opts.HostGuard, rst: opts.TCPClose == TCPCloseRST},
		grpc:   newGRPCProber(opts.UserAgent, opts.HostGuard, tlsSrc),
		guard:  opts.HostGuard,
	}
}

// Probe runs spec once against target and maps the outcome the way the
// kubelet's prober does, emitting the kubelet's events to events (which may
// be nil):
//
//   - the handler errored (after up to 3 tries): Failure and the error, with an
//     Unhealthy event "<Type> probe errored and resulted in <result> state: <err>";
//   - Success: Success, no event;
//   - Warning: Success, with a ProbeWarning event "<Type> probe warning: <output>";
//   - Failure: Failure, with an Unhealthy event "<Type> probe failed: <output>";
//   - Unknown without an error: Failure, no event;
//   - the exec was throttled by probed's own exec cap: the error, no event,
//     no retry (the caller discards it).
//
// A nil spec means there is no probe, which the kubelet counts as Success.
// If ctx ends during the probe the caller is going away: Probe then returns
// Failure and ctx's error and emits nothing, since the container is not at fault.
//
// A network probe whose address the host policy refuses (see hostpolicy.Guard) is
// not sent: it errors, once, with the refusal (a *RefusedError in the chain).
func (p *Prober) Probe(ctx context.Context, probeType probespec.ProbeType, spec *v1.Probe, target Target, events EventSink) (results.Result, string, error) {
	if spec == nil {
		return results.Success, "", nil
	}
	result, output, err := p.runWithRetries(ctx, spec, target)
	if ctx.Err() != nil {
		return results.Failure, output, ctx.Err()
	}
	return judge(probeType, result, output, err, target.ContainerID, events)
}

// judge maps a handler outcome to a container result and its event, as the
// kubelet's prober.probe does.
func judge(probeType probespec.ProbeType, result Result, output string, err error, containerID string, events EventSink) (results.Result, string, error) {
	if err != nil && isThrottled(err) {
		// Not the container's doing: no event on its pod; the worker logs
		// and discards it, and the runtime's metrics count it.
		return results.Failure, output, err
	}
	if errors.Is(err, ErrPodNetworkUnsupported) {
		klog.V(1).InfoS("Probe invalid for this pod", "probeType", probeType, "containerID", containerID, "err", err)
		emit(events, v1.EventTypeWarning, ReasonInvalidProbe, fmt.Sprintf("%s probe: %s", probeType, err))
		return results.Failure, output, err
	}
	if err != nil {
		klog.V(1).InfoS("Probe errored", "probeType", probeType, "containerID", containerID, "result", result, "err", err)
		emit(events, v1.EventTypeWarning, ReasonUnhealthy,
			fmt.Sprintf("%s probe errored and resulted in %s state: %s", probeType, result, err))
		return results.Failure, output, err
	}
	switch result {
	case Success:
		if v := klog.V(3); v.Enabled() {
			v.InfoS("Probe succeeded", "probeType", probeType, "containerID", containerID)
		}
		return results.Success, output, nil
	case Warning:
		klog.V(3).InfoS("Probe succeeded with a warning", "probeType", probeType, "containerID", containerID, "output", output)
		emit(events, v1.EventTypeWarning, ReasonProbeWarning, fmt.Sprintf("%s probe warning: %s", probeType, output))
		return results.Success, output, nil
	case Failure:
		klog.V(1).InfoS("Probe failed", "probeType", probeType, "containerID", containerID, "output", output)
		emit(events, v1.EventTypeWarning, ReasonUnhealthy, fmt.Sprintf("%s probe failed: %s", probeType, output))
		return results.Failure, output, nil
	default:
		klog.V(1).InfoS("Probe unknown without error", "probeType", probeType, "containerID", containerID, "result", result)
		return results.Failure, output, nil
	}
}

// runWithRetries runs the handler until it returns without an error, at
// most maxProbeRetries times, and returns the last attempt.
func (p *Prober) runWithRetries(ctx context.Context, spec *v1.Probe, target Target) (Result, string, error) {
	var (
		result Result
		output string
		err    error
	)
	for range maxProbeRetries {
		result, output, err = p.runOnce(ctx, spec, target)
		// A refusal by the host policy, or of another pod's container,
		// would only be refused again; a throttled exec would only queue
		// again.
		if err == nil || ctx.Err() != nil || hostpolicy.IsRefused(err) || isOwnerMismatch(err) || isThrottled(err) || errors.Is(err, ErrPodNetworkUnsupported) {
			break
		}
	}
	return result, output, err
}

// runOnce picks the handler, in the kubelet's order when several are set.
func (p *Prober) runOnce(ctx context.Context, spec *v1.Probe, target Target) (Result, string, error) {
	timeout := time.Duration(spec.TimeoutSeconds) * time.Second
	if target.Timeout > 0 {
		timeout = target.Timeout
	}
	if timeout <= 0 {
		timeout = defaultTimeout
	}
	if h := spec.ProbeHandler; target.FromPod && h.Exec == nil {
		if target.PodNetns == nil {
			return Unknown, "", errNoPodNetns
		}
		ns, err := target.PodNetns(ctx)
		if err != nil {
			return Unknown, "", err
		}
		target.ns = ns
		target.PodIP = podLoopback(target)
	}
	switch h := spec.ProbeHandler; {
	case h.Exec != nil:
		if v := klog.V(4); v.Enabled() {
			v.InfoS("Exec probe", "containerID", target.ContainerID, "command", h.Exec.Command, "timeout", timeout)
		}
		return execProbe(ctx, p.runner, h.Exec, target, timeout)

	case h.HTTPGet != nil:
		return p.http.run(ctx, h.HTTPGet, target, timeout)
	case h.TCPSocket != nil:
		return p.tcp.run(ctx, h.TCPSocket, target, timeout)
	case h.GRPC != nil:
		return p.grpc.run(ctx, h.GRPC, target, timeout)
	}
	return Unknown, "", errNoHandler
}

// emit sends an event if there is a sink.
func emit(events EventSink, eventType, reason, message string) {
	if events != nil {
		events.Event(eventType, reason, message)
	}
}

// resolvePort turns an httpGet or tcpSocket port into a number as the
// kubelet's ResolveContainerPort (1.37) does: a number is taken as is; a
// string is a container port's name. The errors carry the kubelet's texts
// because users see them in events.
func resolvePort(param intstr.IntOrString, ports []v1.ContainerPort) (int, error) {
	port := -1
	switch param.Type {
	case intstr.Int:
		port = param.IntValue()
	case intstr.String:
		named, ok := findNamedPort(ports, param.StrVal)
		if !ok {
			return 0, fmt.Errorf("port %q not found", param.StrVal)
		}
		port = named
	default:
		return port, fmt.Errorf("intOrString had no kind: %+v", param)
	}
	if port < 1 || port > 65535 {
		return port, fmt.Errorf("invalid port number: %v", port)
	}
	return port, nil
}

// findNamedPort returns the containerPort of the first port called name.
func findNamedPort(ports []v1.ContainerPort, name string) (int, bool) {
	for _, p := range ports {
		if p.Name == name {
			return int(p.ContainerPort), true
		}
	}
	return 0, false
}
