package worker

import (
	"fmt"
	"net"
	"net/url"
	"strings"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/probed-dev/probed/pkg/prober"
)

// State is what a worker did on its last step, for /debug/probes.
type State string

const (
	// StateRunning: the probe ran on the last step.
	StateRunning State = "running"
	// StateOnHold: not probing until a new container instance appears, after
	// a liveness failure or any startup result at its threshold, or (startup
	// only) because the container has started.
	StateOnHold State = "on-hold"
	// StateWaitingForStartup: a liveness or readiness probe waits for the
	// container to count as started.
	StateWaitingForStartup State = "waiting-for-startup"
	// StateInitialDelay: initialDelaySeconds have not passed since the
	// container started.
	StateInitialDelay State = "initial-delay"
	// StateContainerNotRunning: no pod, no container status with an ID yet,
	// or the container is waiting or terminated.
	StateContainerNotRunning State = "container-not-running"
	// StatePending: the worker has not probed yet; after a restart of probed
	// it waits out a random part of its period first.
	StatePending State = "pending"
	// StateStopped: the worker has ended, or is about to.
	StateStopped State = "stopped"
)

// Snapshot is one worker's entry on /debug/probes.
type Snapshot struct {
	PodNamespace string    `json:"podNamespace"`
	PodName      string    `json:"podName"`
	PodUID       types.UID `json:"podUID"`
	Container    string    `json:"container"`
	ProbeType    string    `json:"probeType"`
	// Spec summarises the probe as kubectl describe does.
	Spec        string `json:"spec"`
	State       State  `json:"state"`
	ContainerID string `json:"containerID,omitempty"`
	// Published is the result held in the results cache for ContainerID.
	Published string `json:"published,omitempty"`
	// LastResult and ResultRun drive the thresholds: the last counted result
	// and how many times in a row it came.
	LastResult string `json:"lastResult,omitempty"`
	ResultRun  int    `json:"resultRun"`
	// RestartDeferred says why the container's restart is held back (the
	// restart budget, the workload guard, a PodDisruptionBudget), while
	// it is.
	RestartDeferred string `json:"restartDeferred,omitempty"`
	// TLS is what the last TLS handshake of a probe with probed.io/tls
	// showed: the verified name and server certificate, and expiries.
	TLS     *prober.TLSPeer `json:"tls,omitempty"`
	History []HistoryEntry  `json:"history"`
}

// Snapshot returns the worker's current state. It is safe to call from any
// goroutine; it reflects the worker's last completed decision.
func (w *Worker) Snapshot() Snapshot {
	w.mu.Lock()
	p := w.snap
	hist := w.hist.list()
	w.mu.Unlock()
	s := Snapshot{State: p.state, ContainerID: p.containerID, ResultRun: p.resultRun, RestartDeferred: p.restartDeferred, History: hist}
	if w.cfg.TLS != nil {
		s.TLS = w.session.TLSPeer()
	}
	if p.counted {
		s.LastResult = resultWord(p.lastResult)
	}
	s.PodNamespace, s.PodName, s.PodUID = w.cfg.PodNamespace, w.cfg.PodName, w.cfg.PodUID
	// The summary is built on demand: few read it, every worker would hold it.
	s.Container, s.ProbeType, s.Spec = w.cfg.Container.Name, w.cfg.ProbeType.String(), specSummary(w.cfg.Spec, w.cfg.Period, w.cfg.Timeout)
	if w.cfg.FromPod {
		s.Spec += " from=Pod"
	}
	if s.ContainerID != "" && w.cfg.Results != nil {
		if v, ok := w.cfg.Results.Get(s.ContainerID); ok {
			s.Published = resultWord(v.Result)
		}
	}
	return s
}

// SpecSummary describes a probe in one line, in the spirit of kubectl
// describe: "http-get http://:8080/ready delay=0s timeout=1s period=10s
// #success=1 #failure=3".
func SpecSummary(p *v1.Probe) string {
	if p == nil {
		return "<none>"
	}
	return specSummary(p, 0, 0)
}

// summaryDuration is whole seconds as "90s", as kubectl describe words
// them, and anything finer as Go does ("100ms").
func summaryDuration(d time.Duration) string {
	if d%time.Second == 0 {
		return fmt.Sprintf("%ds", d/time.Second)
	}
	return d.String()
}

// specSummary is SpecSummary with a period and timeout that replace the
// spec's when positive (the millisecond extensions).
func specSummary(p *v1.Probe, period, timeout time.Duration) string {
	if p == nil {
		return "<none>"
	}
	if period <= 0 {
		period = time.Duration(p.PeriodSeconds) * time.Second
	}
	if timeout <= 0 {
		timeout = time.Duration(p.TimeoutSeconds) * time.Second
	}
	attrs := fmt.Sprintf("delay=%ds timeout=%s period=%s #success=%d #failure=%d",
		p.InitialDelaySeconds, summaryDuration(timeout), summaryDuration(period), p.SuccessThreshold, p.FailureThreshold)
	switch h := p.ProbeHandler; {
	case h.Exec != nil:
		return fmt.Sprintf("exec [%s] %s", strings.Join(h.Exec.Command, " "), attrs)
	case h.HTTPGet != nil:
		u := url.URL{Scheme: strings.ToLower(string(h.HTTPGet.Scheme)), Host: h.HTTPGet.Host, Path: h.HTTPGet.Path}
		if u.Scheme == "" {
			u.Scheme = "http"
		}
		if port := h.HTTPGet.Port.String(); port != "" && port != "0" {
			u.Host = net.JoinHostPort(h.HTTPGet.Host, port)
		}
		return fmt.Sprintf("http-get %s %s", u.String(), attrs)
	case h.TCPSocket != nil:
		return fmt.Sprintf("tcp-socket %s %s", net.JoinHostPort(h.TCPSocket.Host, h.TCPSocket.Port.String()), attrs)
	case h.GRPC != nil:
		svc := ""
		if h.GRPC.Service != nil {
			svc = *h.GRPC.Service
		}
		return fmt.Sprintf("grpc :%d service=%q %s", h.GRPC.Port, svc, attrs)
	}
	return "unknown " + attrs
}
