package probespec

// The API's probe validation for v1.37 (validateLivenessProbe,
// validateReadinessProbe, validateStartupProbe, validateProbe,
// validateHandler and the per-handler checks in
// k8s.io/kubernetes/pkg/apis/core/validation), written as tables of rules.
// Two additions: a named port must resolve against the container's ports
// (the API leaves that to the kubelet, which then fails the probe on every
// run; the contract makes it a validation error), and an exec command is
// bounded (limits.go).

import (
	"fmt"
	"slices"
	"strings"

	v1 "k8s.io/api/core/v1"
	apivalidation "k8s.io/apimachinery/pkg/api/validation"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// probeInput is what a rule checks: one defaulted probe of one container.
type probeInput struct {
	probe     *v1.Probe
	typ       ProbeType
	container *v1.Container
	path      *field.Path // the probe itself, e.g. "readinessProbe"
}

// probeRules are applied in order to every probe of the listed types
// (nil: every type). The order is the API's, so errors come out as it lists them.
var probeRules = []struct {
	name  string
	types []ProbeType
	check func(in probeInput) field.ErrorList
}{
	{"exactly one valid handler", nil, checkHandler},
	{"non-negative numbers", nil, checkCounts},
	{"terminationGracePeriodSeconds > 0", nil, checkGracePeriodPositive},
	{"successThreshold is 1", []ProbeType{Liveness, Startup}, checkSuccessThresholdOne},
	{"no terminationGracePeriodSeconds", []ProbeType{Readiness}, checkNoGracePeriod},
}

// validateProbe validates a defaulted probe of type t on container c.
// Error paths start at the probe's own field name, e.g. "readinessProbe.httpGet.port".
func validateProbe(p *v1.Probe, t ProbeType, c *v1.Container) field.ErrorList {
	in := probeInput{probe: p, typ: t, container: c, path: field.NewPath(probeFieldName(t))}
	var errs field.ErrorList
	for _, r := range probeRules {
		if r.types == nil || slices.Contains(r.types, t) {
			errs = append(errs, r.check(in)...)
		}
	}
	return errs
}

// probeProblems turns validation errors into problems whose Field is
// relative to the probe.
func probeProblems(container string, t ProbeType, fromAnnotation bool, errs field.ErrorList) []ProbeProblem {
	root := probeFieldName(t)
	out := make([]ProbeProblem, 0, len(errs))
	for _, e := range errs {
		f := strings.TrimPrefix(strings.TrimPrefix(e.Field, root), ".")
		typ := t
		out = append(out, ProbeProblem{
			Container:      container,
			Type:           &typ,
			Field:          f,
			Detail:         e.ErrorBody(),
			FromAnnotation: fromAnnotation,
		})
	}
	return out
}

// probeHandlers are a probe's handler kinds, in the API's order. The
// first one set counts; any other set is forbidden.
var probeHandlers = []struct {
	name     string
	set      func(*v1.ProbeHandler) bool
	validate func(h *v1.ProbeHandler, c *v1.Container, path *field.Path) field.ErrorList
}{
	{"exec", func(h *v1.ProbeHandler) bool { return h.Exec != nil }, checkExec},
	{"httpGet", func(h *v1.ProbeHandler) bool { return h.HTTPGet != nil }, checkHTTPGet},
	{"tcpSocket", func(h *v1.ProbeHandler) bool { return h.TCPSocket != nil }, checkTCPSocket},
	{"grpc", func(h *v1.ProbeHandler) bool { return h.GRPC != nil }, checkGRPC},
}

func checkHandler(in probeInput) field.ErrorList {
	var errs field.ErrorList
	found := false
	for _, h := range probeHandlers {
		if !h.set(&in.probe.ProbeHandler) {
			continue
		}
		path := in.path.Child(h.name)
		if found {
			errs = append(errs, field.Forbidden(path, "may not specify more than 1 handler type"))
			continue
		}
		found = true
		errs = append(errs, h.validate(&in.probe.ProbeHandler, in.container, path)...)
	}
	if !found {
		errs = append(errs, field.Required(in.path, "must specify a handler type"))
	}
	return errs
}

// probeCounts are the probe's numbers that must not be negative. Zero
// never reaches validation where a default exists.
var probeCounts = []struct {
	name string
	get  func(*v1.Probe) int32
}{
	{"initialDelaySeconds", func(p *v1.Probe) int32 { return p.InitialDelaySeconds }},
	{"timeoutSeconds", func(p *v1.Probe) int32 { return p.TimeoutSeconds }},
	{"periodSeconds", func(p *v1.Probe) int32 { return p.PeriodSeconds }},
	{"successThreshold", func(p *v1.Probe) int32 { return p.SuccessThreshold }},
	{"failureThreshold", func(p *v1.Probe) int32 { return p.FailureThreshold }},
}

func checkCounts(in probeInput) field.ErrorList {
	var errs field.ErrorList
	for _, c := range probeCounts {
		errs = append(errs, apivalidation.ValidateNonnegativeField(int64(c.get(in.probe)), in.path.Child(c.name))...)
	}
	return errs
}

func checkGracePeriodPositive(in probeInput) field.ErrorList {
	if g := in.probe.TerminationGracePeriodSeconds; g != nil && *g <= 0 {
		return field.ErrorList{field.Invalid(in.path.Child("terminationGracePeriodSeconds"), *g, "must be greater than 0")}
	}
	return nil
}

func checkSuccessThresholdOne(in probeInput) field.ErrorList {
	if in.probe.SuccessThreshold != 1 {
		return field.ErrorList{field.Invalid(in.path.Child("successThreshold"), in.probe.SuccessThreshold, "must be 1")}
	}
	return nil
}

func checkNoGracePeriod(in probeInput) field.ErrorList {
	if g := in.probe.TerminationGracePeriodSeconds; g != nil {
		return field.ErrorList{field.Invalid(in.path.Child("terminationGracePeriodSeconds"), *g, "must not be set for readinessProbes")}
	}
	return nil
}

func checkExec(h *v1.ProbeHandler, _ *v1.Container, path *field.Path) field.ErrorList {
	if len(h.Exec.Command) == 0 {
		return field.ErrorList{field.Required(path.Child("command"), "")}
	}
	return checkExecSize(h.Exec.Command, path.Child("command"))
}

// httpSchemes are the schemes an httpGet probe may use; httpProtocols its
// wire protocols (KEP-5999: HTTP2 is h2c, HTTP/2 over cleartext with prior
// knowledge, alpha in 1.37); grpcModes a grpc probe's connection modes
// (KEP-4939: TLS without verification, alpha in 1.37).
var (
	httpSchemes   = []v1.URIScheme{v1.URISchemeHTTP, v1.URISchemeHTTPS}
	httpProtocols = []v1.HTTPProtocol{v1.HTTPProtocolHTTP1, v1.HTTPProtocolHTTP2}
	grpcModes     = []v1.GRPCProbeMode{v1.GRPCProbeModePlaintext, v1.GRPCProbeModeTLS}
)

func checkHTTPGet(h *v1.ProbeHandler, c *v1.Container, path *field.Path) field.ErrorList {
	g := h.HTTPGet
	var errs field.ErrorList
	if g.Path == "" {
		errs = append(errs, field.Required(path.Child("path"), ""))
	}
	errs = append(errs, checkPort(g.Port, c, path.Child("port"))...)
	if !slices.Contains(httpSchemes, g.Scheme) {
		errs = append(errs, field.NotSupported(path.Child("scheme"), g.Scheme, httpSchemes))
	}
	for i, hdr := range g.HTTPHeaders {
		for _, msg := range validation.IsHTTPHeaderName(hdr.Name) {
			errs = append(errs, field.Invalid(path.Child("httpHeaders").Index(i).Child("name"), hdr.Name, msg))
		}
	}
	if p := g.Protocol; p != nil {
		switch {
		case !slices.Contains(httpProtocols, *p):
			errs = append(errs, field.NotSupported(path.Child("protocol"), *p, httpProtocols))
		case *p == v1.HTTPProtocolHTTP2 && g.Scheme != v1.URISchemeHTTP:
			errs = append(errs, field.Invalid(path.Child("protocol"), *p, "is only supported with HTTP (H2C)"))
		case *p == v1.HTTPProtocolHTTP2 && g.Host != "":
			errs = append(errs, field.Invalid(path.Child("host"), g.Host, "must be empty when `protocol` is \"HTTP2\""))
		}
	}
	return errs
}

func checkTCPSocket(h *v1.ProbeHandler, c *v1.Container, path *field.Path) field.ErrorList {
	return checkPort(h.TCPSocket.Port, c, path.Child("port"))
}

// checkGRPC checks grpc.port, which is a number only (its type says so),
// and grpc.mode.
func checkGRPC(h *v1.ProbeHandler, _ *v1.Container, path *field.Path) field.ErrorList {
	errs := checkPortNumber(int(h.GRPC.Port), path.Child("port"))
	if m := h.GRPC.Mode; m != nil && !slices.Contains(grpcModes, *m) {
		errs = append(errs, field.NotSupported(path.Child("mode"), *m, grpcModes))
	}
	return errs
}

func checkPortNumber(port int, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	for _, msg := range validation.IsValidPortNum(port) {
		errs = append(errs, field.Invalid(path, port, msg))
	}
	return errs
}

// checkPort checks a port given as a number or a name (ValidatePortNumOrName),
// and that a valid name resolves, as the kubelet resolves it: the first of
// the container's ports with that name, whatever its protocol.
func checkPort(port intstr.IntOrString, c *v1.Container, path *field.Path) field.ErrorList {
	switch port.Type {
	case intstr.Int:
		return checkPortNumber(int(port.IntVal), path)
	case intstr.String:
		var errs field.ErrorList
		for _, msg := range validation.IsValidPortName(port.StrVal) {
			errs = append(errs, field.Invalid(path, port.StrVal, msg))
		}
		if len(errs) > 0 {
			return errs
		}
		return checkPortResolves(port.StrVal, c, path)
	}
	return field.ErrorList{field.Invalid(path, port, fmt.Sprintf("unknown port type %d", port.Type))}
}

func checkPortResolves(name string, c *v1.Container, path *field.Path) field.ErrorList {
	for _, cp := range c.Ports {
		if cp.Name != name {
			continue
		}
		if msgs := validation.IsValidPortNum(int(cp.ContainerPort)); len(msgs) > 0 {
			return field.ErrorList{field.Invalid(path, name,
				fmt.Sprintf("container port %q is %d: %s", name, cp.ContainerPort, msgs[0]))}
		}
		return nil
	}
	return field.ErrorList{field.Invalid(path, name, fmt.Sprintf("no container port named %q", name))}
}
