package probespec

import (
	v1 "k8s.io/api/core/v1"
)

// probeDefaults are the API's defaults for a Probe's numbers
// (SetDefaults_Probe in k8s.io/kubernetes/pkg/apis/core/v1/defaults.go): a
// zero value takes the default. initialDelaySeconds has none: 0 is its
// default. Negative values are left for validation to reject.
var probeDefaults = []struct {
	name  string
	field func(*v1.Probe) *int32
	value int32
}{
	{"timeoutSeconds", func(p *v1.Probe) *int32 { return &p.TimeoutSeconds }, 1},
	{"periodSeconds", func(p *v1.Probe) *int32 { return &p.PeriodSeconds }, 10},
	{"successThreshold", func(p *v1.Probe) *int32 { return &p.SuccessThreshold }, 1},
	{"failureThreshold", func(p *v1.Probe) *int32 { return &p.FailureThreshold }, 3},
}

// handlerDefaults are the API's defaults for the probe handlers:
// SetDefaults_HTTPGetAction, and the generated default for GRPCAction.Service
// (+default="" in k8s.io/api/core/v1, so a nil service becomes ""; the
// kubelet treats both alike, the health check of the whole server).
var handlerDefaults = []func(*v1.ProbeHandler){
	func(h *v1.ProbeHandler) {
		if h.HTTPGet == nil {
			return
		}
		if h.HTTPGet.Path == "" {
			h.HTTPGet.Path = "/"
		}
		if h.HTTPGet.Scheme == "" {
			h.HTTPGet.Scheme = v1.URISchemeHTTP
		}
	},
	func(h *v1.ProbeHandler) {
		if h.GRPC != nil && h.GRPC.Service == nil {
			h.GRPC.Service = new(string)
		}
	},
}

// setProbeDefaults applies the API's defaults to p in place, as the API
// server does on admission (SetObjectDefaults_Pod). It is idempotent.
func setProbeDefaults(p *v1.Probe) {
	for _, d := range probeDefaults {
		if f := d.field(p); *f == 0 {
			*f = d.value
		}
	}
	for _, d := range handlerDefaults {
		d(&p.ProbeHandler)
	}
}
