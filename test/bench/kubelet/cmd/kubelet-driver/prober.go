// This file re-creates, for network probes, the call path of the kubelet's
// pkg/kubelet/prober/prober.go at k8s.io/kubernetes v1.37.2 (Copyright 2014
// The Kubernetes Authors, Apache License 2.0): newProber, probe,
// runProbeWithRetries and runProbe are copied with only what cannot be
// imported without the whole kubelet replaced (the event recorder, the
// container ID type, format.Pod). The probe packages themselves are the real
// ones, imported from k8s.io/kubernetes v1.37.2.

package main

import (
	"context"
	"fmt"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"
	"k8s.io/kubernetes/pkg/probe"
	grpcprobe "k8s.io/kubernetes/pkg/probe/grpc"
	httpprobe "k8s.io/kubernetes/pkg/probe/http"
	tcpprobe "k8s.io/kubernetes/pkg/probe/tcp"
)

const maxProbeRetries = 3

// probeType and its String are pkg/kubelet/prober's.
type probeType int

const (
	liveness probeType = iota
	readiness
	startup
)

func (t probeType) String() string {
	switch t {
	case readiness:
		return "Readiness"
	case liveness:
		return "Liveness"
	case startup:
		return "Startup"
	default:
		return "UNKNOWN"
	}
}

// result is pkg/kubelet/prober/results.Result.
type result int

const (
	resultUnknown result = iota - 1
	resultSuccess
	resultFailure
)

// containerID is kubecontainer.ContainerID.
type containerID struct {
	Type string
	ID   string
}

// eventRecorder receives the events recordContainerEvent would send; success
// paths never reach it.
type eventRecorder interface {
	Eventf(pod *v1.Pod, container *v1.Container, eventType, reason, messageFmt string, args ...interface{})
}

type kubeletProber struct {
	http     httpprobe.Prober
	tcp      tcpprobe.Prober
	grpc     grpcprobe.Prober
	recorder eventRecorder
}

func newProber(recorder eventRecorder) *kubeletProber {
	const followNonLocalRedirects = false
	return &kubeletProber{
		http:     httpprobe.New(followNonLocalRedirects),
		tcp:      tcpprobe.New(),
		grpc:     grpcprobe.New(),
		recorder: recorder,
	}
}

func (pb *kubeletProber) recordContainerEvent(pod *v1.Pod, container *v1.Container, eventType, reason, message string, args ...interface{}) {
	pb.recorder.Eventf(pod, container, eventType, reason, message, args...)
}

// probe is the kubelet's prober.probe.
func (pb *kubeletProber) probe(ctx context.Context, probeType probeType, pod *v1.Pod, status v1.PodStatus, container v1.Container, containerID containerID) (result, error) {
	var probeSpec *v1.Probe
	switch probeType {
	case readiness:
		probeSpec = container.ReadinessProbe
	case liveness:
		probeSpec = container.LivenessProbe
	case startup:
		probeSpec = container.StartupProbe
	default:
		return resultFailure, fmt.Errorf("unknown probe type: %q", probeType)
	}

	if probeSpec == nil {
		klog.InfoS("Probe is nil", "probeType", probeType, "pod", klog.KObj(pod), "podUID", pod.UID, "containerName", container.Name)
		return resultSuccess, nil
	}

	result, output, err := pb.runProbeWithRetries(ctx, probeType, probeSpec, pod, status, container, containerID, maxProbeRetries)

	if err != nil {
		// Handle probe error
		klog.V(1).ErrorS(err, "Probe errored", "probeType", probeType, "pod", klog.KObj(pod), "podUID", pod.UID, "containerName", container.Name, "probeResult", result)
		pb.recordContainerEvent(pod, &container, v1.EventTypeWarning, "Unhealthy", "%s probe errored and resulted in %s state: %s", probeType, result, err)
		return resultFailure, err
	}

	switch result {
	case probe.Success:
		klog.V(3).InfoS("Probe succeeded", "probeType", probeType, "pod", klog.KObj(pod), "podUID", pod.UID, "containerName", container.Name)
		return resultSuccess, nil

	case probe.Warning:
		pb.recordContainerEvent(pod, &container, v1.EventTypeWarning, "ProbeWarning", "%s probe warning: %s", probeType, output)
		klog.V(3).InfoS("Probe succeeded with a warning", "probeType", probeType, "pod", klog.KObj(pod), "podUID", pod.UID, "containerName", container.Name, "output", output)
		return resultSuccess, nil

	case probe.Failure:
		klog.V(1).InfoS("Probe failed", "probeType", probeType, "pod", klog.KObj(pod), "podUID", pod.UID, "containerName", container.Name, "probeResult", result, "output", output)
		pb.recordContainerEvent(pod, &container, v1.EventTypeWarning, "Unhealthy", "%s probe failed: %s", probeType, output)
		return resultFailure, nil

	case probe.Unknown:
		klog.V(1).InfoS("Probe unknown without error", "probeType", probeType, "pod", klog.KObj(pod), "podUID", pod.UID, "containerName", container.Name, "probeResult", result)
		return resultFailure, nil

	default:
		klog.V(1).InfoS("Unsupported probe result", "probeType", probeType, "pod", klog.KObj(pod), "podUID", pod.UID, "containerName", container.Name, "probeResult", result)
		return resultFailure, nil
	}
}

// runProbeWithRetries is the kubelet's, verbatim.
func (pb *kubeletProber) runProbeWithRetries(ctx context.Context, probeType probeType, p *v1.Probe, pod *v1.Pod, status v1.PodStatus, container v1.Container, containerID containerID, retries int) (probe.Result, string, error) {
	var err error
	var result probe.Result
	var output string
	for i := 0; i < retries; i++ {
		result, output, err = pb.runProbe(ctx, probeType, p, pod, status, container, containerID)
		if err == nil {
			return result, output, nil
		}
	}
	return result, output, err
}

// runProbe is the kubelet's, for the three network handlers.
func (pb *kubeletProber) runProbe(ctx context.Context, probeType probeType, p *v1.Probe, pod *v1.Pod, status v1.PodStatus, container v1.Container, containerID containerID) (probe.Result, string, error) {
	timeout := time.Duration(p.TimeoutSeconds) * time.Second
	switch {
	case p.HTTPGet != nil:
		req, err := httpprobe.NewRequestForHTTPGetAction(p.HTTPGet, &container, status.PodIP, "probe")
		if err != nil {
			// Log and record event for Unknown result
			klog.V(4).InfoS("HTTP-Probe failed to create request", "error", err)
			return probe.Unknown, "", err
		}
		if klogV4 := klog.V(4); klogV4.Enabled() {
			port := req.URL.Port()
			host := req.URL.Hostname()
			path := req.URL.Path
			scheme := req.URL.Scheme
			headers := p.HTTPGet.HTTPHeaders
			klogV4.InfoS("HTTP-Probe", "scheme", scheme, "host", host, "port", port, "path", path, "timeout", timeout, "headers", headers, "probeType", probeType)
		}
		// The kubelet also asks its H2CContainerProbe feature gate (alpha,
		// off by default); this driver runs as if it were on.
		if p.HTTPGet.Protocol != nil && *p.HTTPGet.Protocol == v1.HTTPProtocolHTTP2 {
			return pb.http.ProbeH2C(req, timeout)
		}
		return pb.http.Probe(req, timeout)

	case p.TCPSocket != nil:
		port, err := probe.ResolveContainerPort(p.TCPSocket.Port, &container)
		if err != nil {
			klog.V(4).InfoS("TCP-Probe failed to resolve port", "error", err)
			return probe.Unknown, "", err
		}
		host := p.TCPSocket.Host
		if host == "" {
			host = status.PodIP
		}
		klog.V(4).InfoS("TCP-Probe", "host", host, "port", port, "timeout", timeout)
		return pb.tcp.Probe(host, port, timeout)

	case p.GRPC != nil:
		host := status.PodIP
		service := ""
		if p.GRPC.Service != nil {
			service = *p.GRPC.Service
		}
		// As for h2c, the GRPCContainerProbeTLS gate is taken as on.
		useTLS := p.GRPC.Mode != nil && *p.GRPC.Mode == v1.GRPCProbeModeTLS
		klog.V(4).InfoS("GRPC-Probe", "host", host, "service", service, "port", p.GRPC.Port, "timeout", timeout, "tls", useTLS)
		return pb.grpc.Probe(host, service, int(p.GRPC.Port), timeout, grpcprobe.ProbeOptions{UseTLS: useTLS})

	default:
		klog.V(4).InfoS("Failed to find probe builder for container", "containerName", container.Name)
		return probe.Unknown, "", fmt.Errorf("missing probe handler for %s/%s:%s", pod.Namespace, pod.Name, container.Name)
	}
}
