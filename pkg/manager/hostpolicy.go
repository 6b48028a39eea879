package manager

import (
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/probed-dev/probed/pkg/hostpolicy"
	"github.com/probed-dev/probed/pkg/probespec"
	"github.com/probed-dev/probed/pkg/worker"
)

// hostPolicyProblems applies --probe-host-policy to the hosts that probes
// name as IP literals (httpGet.host, tcpSocket.host), so that a refused probe
// shows up with the other validation problems: an InvalidProbe event, and
// for readiness a False condition with reason InvalidProbe. It returns the
// probes that may run and appends a problem for each refused one.
//
// What cannot be judged here is judged by the prober when it dials: host
// names (by the addresses they resolve to), redirects, the pod IP itself,
// and hosts that name one of exempt (Manager.syncIPs: IPs that may be the
// pod's own, which the dial checks against the runtime's answer). Until
// the pod has an IP nothing is judged here, since the pod's own IPs are
// always allowed (a hostNetwork pod's IP is the node's).
func hostPolicyProblems(guard *hostpolicy.Guard, pod *v1.Pod, exempt []string, declared []probespec.DeclaredProbe, problems []probespec.ProbeProblem) ([]probespec.DeclaredProbe, []probespec.ProbeProblem) {
	if guard.Policy() == hostpolicy.Kubelet {
		return declared, problems
	}
	if len(worker.PodIPs(pod)) == 0 {
		return declared, problems
	}
	parsed := hostpolicy.ParsePodIPs(exempt...)
	kept := declared[:0:0]
	for _, d := range declared {
		if d.FromPod {
			// Sent from inside the pod, to its loopback: not the node's
			// (probespec and the prober judge where it may go).
			kept = append(kept, d)
			continue
		}
		fieldPath, host := probeHost(d.Probe)
		if host != "" {
			if err := guard.CheckHost(host, parsed); err != nil {
				t := d.Type
				problems = append(problems, probespec.ProbeProblem{
					Container:      d.Container.Name,
					Type:           &t,
					Field:          fieldPath,
					Detail:         field.ErrorTypeForbidden.String() + ": " + err.Error(),
					FromAnnotation: d.FromAnnotation,
				})
				continue
			}
		}
		kept = append(kept, d)
	}
	return kept, problems
}

// probeHost returns the host a network probe names, with its field path;
// "" when it names none (the pod IP is used).
func probeHost(p *v1.Probe) (string, string) {
	switch {
	case p == nil:
	case p.HTTPGet != nil:
		return "httpGet.host", p.HTTPGet.Host
	case p.TCPSocket != nil:
		return "tcpSocket.host", p.TCPSocket.Host
	}
	return "", ""
}

// podNetworkProblems refuses the probes sent from inside the pod
// ("probed.io/from": "Pod") when the node does not allow them
// (--pod-network-probes off: enabled false), with InvalidProbe.
func podNetworkProblems(enabled bool, declared []probespec.DeclaredProbe, problems []probespec.ProbeProblem) ([]probespec.DeclaredProbe, []probespec.ProbeProblem) {
	if enabled {
		return declared, problems
	}
	kept := declared[:0:0]
	for _, d := range declared {
		if !d.FromPod {
			kept = append(kept, d)
			continue
		}
		t := d.Type
		problems = append(problems, probespec.ProbeProblem{
			Container:      d.Container.Name,
			Type:           &t,
			Field:          probespec.FromField,
			Detail:         field.Forbidden(nil, "probes from inside the pod are not enabled on this node (probed's --pod-network-probes)").ErrorBody(),
			FromAnnotation: d.FromAnnotation,
		})
	}
	return kept, problems
}
