package probespec

import (
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// keepAliveHandlers are the handlers whose connection can be kept
// between runs; "probed.io/keepAlive": true on any other is invalid.
var keepAliveHandlers = []struct {
	name string
	set  func(*v1.ProbeHandler) bool
}{
	{"httpGet", func(h *v1.ProbeHandler) bool { return h.HTTPGet != nil }},
	{"grpc", func(h *v1.ProbeHandler) bool { return h.GRPC != nil }},
}

// checkKeepAlive validates a probe's "probed.io/keepAlive" (nil: absent).
// false asks for the default and is valid on any probe.
func checkKeepAlive(p *v1.Probe, keepAlive *bool, path *field.Path) field.ErrorList {
	if keepAlive == nil || !*keepAlive {
		return nil
	}
	for _, h := range keepAliveHandlers {
		if h.set(&p.ProbeHandler) {
			return nil
		}
	}
	return field.ErrorList{field.Invalid(path.Child(KeepAliveField), true, "only httpGet and grpc probes can keep their connection alive")}
}
