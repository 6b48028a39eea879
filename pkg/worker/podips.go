package worker

import (
	"slices"

	v1 "k8s.io/api/core/v1"
)

// PodIPs returns the pod's IPs as its status gives them: status.podIPs,
// then status.podIP if it is not among them, without blanks or repeats.
// They are only what a writer of pods/status says; the caller decides
// whether the node vouches for them (OwnIPs.Narrow).
func PodIPs(pod *v1.Pod) []string {
	if pod == nil {
		return nil
	}
	out := make([]string, 0, len(pod.Status.PodIPs)+1)
	eachPodIP(pod, func(ip string) { out = append(out, ip) })
	return out
}

// eachPodIP calls f with each of PodIPs(pod), in order.
func eachPodIP(pod *v1.Pod, f func(string)) {
	ips := pod.Status.PodIPs
	for i, ip := range ips {
		if ip.IP != "" && !slices.ContainsFunc(ips[:i], func(p v1.PodIP) bool { return p.IP == ip.IP }) {
			f(ip.IP)
		}
	}
	if ip := pod.Status.PodIP; ip != "" && !slices.ContainsFunc(ips, func(p v1.PodIP) bool { return p.IP == ip }) {
		f(ip)
	}
}

// targetIPs is PodIPs(pod) for the probe's Target, from the pod the worker
// already holds. The last probe's slice is reused while the IPs are the
// same, so that a steady probe allocates nothing; nobody mutates it.
func (w *Worker) targetIPs(pod *v1.Pod) []string {
	n, same := 0, true
	eachPodIP(pod, func(ip string) {
		same = same && n < len(w.podIPs) && w.podIPs[n] == ip
		n++
	})
	if !same || n != len(w.podIPs) {
		w.podIPs = PodIPs(pod)
	}
	return w.podIPs
}
