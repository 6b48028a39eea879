package probespec

import (
	"net/netip"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// FromField is the probe field, beside core/v1 Probe's own, that says
// where a network probe is sent from (docs/pod-network.md). FromNode, or
// no field, is the kubelet's: from the node to the pod's IP. FromPod opens
// the probe's socket inside the pod's own network namespace and connects
// to the pod's loopback, so an app that listens only on 127.0.0.1 can be
// probed, and no network policy or mesh sees the probe as outside traffic.
const FromField = "probed.io/from"

// Where a network probe is sent from.
const (
	FromNode = "Node"
	FromPod  = "Pod"
)

// fromHandlers are the handlers that may be sent from inside the pod: the
// network ones. An exec probe already runs inside the container.
var fromHandlers = []struct {
	name string
	set  func(*v1.ProbeHandler) bool
}{
	{"httpGet", func(h *v1.ProbeHandler) bool { return h.HTTPGet != nil }},
	{"tcpSocket", func(h *v1.ProbeHandler) bool { return h.TCPSocket != nil }},
	{"grpc", func(h *v1.ProbeHandler) bool { return h.GRPC != nil }},
}

// checkFrom validates a probe's FromField (nil: absent) and reports
// whether the probe is sent from inside the pod. From inside the pod a
// probe reaches only the pod's own loopback: its host must be empty (the
// loopback), "localhost" or a loopback address; a pod on the node's
// network has no network namespace of its own.
func checkFrom(p *v1.Probe, from *string, hostNetwork bool, path *field.Path) (bool, field.ErrorList) {
	if from == nil || *from == FromNode {
		return false, nil
	}
	fp := path.Child(FromField)
	if *from != FromPod {
		return false, field.ErrorList{field.NotSupported(fp, *from, []string{FromNode, FromPod})}
	}
	var errs field.ErrorList
	handled := false
	for _, h := range fromHandlers {
		handled = handled || h.set(&p.ProbeHandler)
	}
	if !handled {
		errs = append(errs, field.Invalid(fp, *from, "only httpGet, tcpSocket and grpc probes can be sent from inside the pod (an exec probe runs there already)"))
	}
	if hostNetwork {
		errs = append(errs, field.Invalid(fp, *from, "a pod on the node's network (hostNetwork) has no network namespace of its own"))
	}
	if h := p.HTTPGet; h != nil && !IsPodLoopbackHost(h.Host) {
		errs = append(errs, field.Invalid(path.Child("httpGet", "host"), h.Host, "with probed.io/from Pod, must be empty (the pod's loopback), localhost or a loopback address"))
	}
	if t := p.TCPSocket; t != nil && !IsPodLoopbackHost(t.Host) {
		errs = append(errs, field.Invalid(path.Child("tcpSocket", "host"), t.Host, "with probed.io/from Pod, must be empty (the pod's loopback), localhost or a loopback address"))
	}
	return len(errs) == 0, errs
}

// IsPodLoopbackHost reports whether host, as a probe writes it, names the
// loopback of the namespace the probe is sent from: empty (the default),
// "localhost", or a loopback IP literal (127.0.0.0/8, ::1).
func IsPodLoopbackHost(host string) bool {
	if host == "" || host == "localhost" {
		return true
	}
	a, err := netip.ParseAddr(host)
	return err == nil && a.Zone() == "" && a.Unmap().IsLoopback()
}
