// Package probespec turns a pod into the probes probed must run (contract
// §1): the probed.io/probes annotation, the pod spec's own probe fields, or
// both, parsed, defaulted and validated exactly as the API would. It is the
// one home of those rules: the daemon, the adoption webhook and the
// converter judge a probe valid or invalid the same way, with the same
// messages.
//
// The pieces live in sibling files:
//   - parse.go:    strict decoding of the annotation (JSON or YAML);
//   - defaults.go: the API's defaults, as a table;
//   - validate.go: the API's validation (validateProbe and friends), as tables;
//   - targets.go:  which containers may be probed;
//   - keepalive.go: the probed.io/keepAlive extension;
//   - httpcheck.go: the probed.io/expectStatus and expectBody extensions;
//   - grpcmode.go:  upstream's grpc.mode (TLS), newer than k8s.io/api here;
//   - subsecond.go: the probed.io/periodMilliseconds and timeoutMilliseconds extensions;
//   - tls.go: the probed.io/tls extension;
//   - from.go: the probed.io/from extension (probes from inside the pod);
//   - reach.go:     what a probe runs or where it connects (its reach), and
//     probed.io/approved-reach, which approves it.
package probespec

import (
	"fmt"
	"strings"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// ProbesAnnotation is the pod annotation that declares probed's probes.
//
// Its value is a JSON (or YAML) object keyed by container name; each value
// holds any of livenessProbe, readinessProbe and startupProbe, each a core/v1
// Probe.
const ProbesAnnotation = "probed.io/probes"

// ProbeSource says where DeclaredProbes takes probes from (--probe-source).
type ProbeSource string

const (
	// ProbeSourceAnnotation runs only the probes in the probed.io/probes annotation.
	// It is the default, and what the zero ProbeSource means.
	ProbeSourceAnnotation ProbeSource = "annotation"
	// ProbeSourceSpec runs only the pod spec's livenessProbe, readinessProbe
	// and startupProbe fields.
	ProbeSourceSpec ProbeSource = "spec"
	// ProbeSourceBoth runs both; the annotation wins for the same container
	// and probe type.
	ProbeSourceBoth ProbeSource = "both"
)

// ParseProbeSource parses a --probe-source value. The empty string means
// the default, ProbeSourceAnnotation. Values are case-sensitive.
func ParseProbeSource(s string) (ProbeSource, error) {
	switch ProbeSource(s) {
	case "", ProbeSourceAnnotation:
		return ProbeSourceAnnotation, nil
	case ProbeSourceSpec, ProbeSourceBoth:
		return ProbeSource(s), nil
	}
	return "", fmt.Errorf("invalid probe source %q: must be one of %q, %q or %q",
		s, ProbeSourceAnnotation, ProbeSourceSpec, ProbeSourceBoth)
}

// String returns the canonical spelling; the zero value prints as "annotation".
func (s ProbeSource) String() string {
	if s == "" {
		return string(ProbeSourceAnnotation)
	}
	return string(s)
}

// Set parses v into s, so that *ProbeSource is a flag.Value (and a pflag.Value).
func (s *ProbeSource) Set(v string) error {
	p, err := ParseProbeSource(v)
	if err != nil {
		return err
	}
	*s = p
	return nil
}

// Type names the flag's value type for pflag's help output.
func (s ProbeSource) Type() string { return "probeSource" }

// fromAnnotation reports whether s reads the annotation. Unknown values
// behave as the default, so that a caller's mistake never runs spec probes.
func (s ProbeSource) fromAnnotation() bool { return s != ProbeSourceSpec }

// fromSpec reports whether s reads the pod spec's probe fields.
func (s ProbeSource) fromSpec() bool { return s == ProbeSourceSpec || s == ProbeSourceBoth }

// DeclaredProbe is one valid probe that probed should run.
type DeclaredProbe struct {
	// Container is a deep copy of the target container's spec: a regular
	// container, or a restartable init container (a sidecar).
	Container v1.Container
	// InitContainer is true for a sidecar: an init container with restartPolicy Always.
	InitContainer bool
	// Type is the probe type.
	Type ProbeType
	// Probe is a deep copy, defaulted as the API does and valid. Named ports
	// are left as declared (the prober resolves them); they are known to
	// resolve against Container.Ports.
	Probe *v1.Probe
	// FromAnnotation is true when the probe comes from the probed.io/probes
	// annotation, false when it comes from the pod spec.
	FromAnnotation bool
	// KeepAlive is the annotation's "probed.io/keepAlive" (httpGet and grpc
	// only): reuse one connection across runs, which the kubelet never does.
	KeepAlive bool
	// HTTPCheck is the annotation's "probed.io/expectStatus" and
	// "probed.io/expectBody" (httpGet only), compiled; nil when neither is set.
	HTTPCheck *HTTPCheck
	// Period and Timeout are the annotation's "probed.io/periodMilliseconds"
	// and "probed.io/timeoutMilliseconds"; zero: the probe's own seconds.
	Period, Timeout time.Duration
	// TLS is the annotation's "probed.io/tls" (HTTPS and gRPC only):
	// verify the server, present a client certificate; nil: the kubelet's
	// unverified TLS.
	TLS *TLS
	// FromPod is the annotation's "probed.io/from": "Pod" (httpGet,
	// tcpSocket and grpc only): the probe's socket is opened inside the
	// pod's network namespace and connects to the pod's loopback.
	FromPod bool
}

// SameExtensions reports whether a and b ask for the same probed
// extensions, so that a probe whose spec and extensions are unchanged
// keeps its worker.
func SameExtensions(a, b DeclaredProbe) bool {
	return a.KeepAlive == b.KeepAlive && a.HTTPCheck.Equal(b.HTTPCheck) &&
		a.Period == b.Period && a.Timeout == b.Timeout && a.TLS.Equal(b.TLS) && a.FromPod == b.FromPod
}

// ProbeProblem is one reason a declared probe, or the whole annotation, is not run.
//
// There are three shapes:
//   - Type == nil, Container == "": the whole annotation is malformed (not
//     JSON or YAML, the wrong shape, an unknown or duplicate field); nothing
//     from the annotation runs. Detail says where and what.
//   - Type == nil, Container != "": an annotation key that names no probe
//     target (an unknown container, a plain init container or an ephemeral
//     container); only that key is ignored.
//   - Type != nil: the probe Container/Type is invalid and does not run.
//     Field is the path inside the probe (e.g. "httpGet.port"; empty for the
//     probe as a whole), Detail the API-style error ("Invalid value: ...").
type ProbeProblem struct {
	// Container is the container name (the annotation key), or "" for the whole annotation.
	Container string
	// Type is the probe type, or nil for a problem with the annotation or one of its keys.
	Type *ProbeType
	// Field is the path of the offending field inside the probe, e.g. "httpGet.port".
	Field string
	// Detail is what is wrong, e.g. `Invalid value: "metrics": no container port named "metrics"`.
	Detail string
	// FromAnnotation is true for problems with the annotation, false for the
	// pod spec's own probe fields.
	FromAnnotation bool
}

// String names the container, the probe type, the field and the problem, e.g.
//
//	container "app" readinessProbe: httpGet.port: Invalid value: "metrics": no container port named "metrics"
//	annotation "probed.io/probes": container "db": Not found: no container or restartable init container of this name in the pod
//	annotation "probed.io/probes": app.readinessProbe: unknown field "perodSeconds"
func (p ProbeProblem) String() string {
	var b strings.Builder
	if p.Type == nil {
		fmt.Fprintf(&b, "annotation %q: ", ProbesAnnotation)
		if p.Container != "" {
			fmt.Fprintf(&b, "container %q: ", p.Container)
		}
	} else {
		fmt.Fprintf(&b, "container %q %s: ", p.Container, probeFieldName(*p.Type))
	}
	if p.Field != "" {
		b.WriteString(p.Field)
		b.WriteString(": ")
	}
	b.WriteString(p.Detail)
	return b.String()
}

// probeTypes lists the probe types in output order, with their API field
// names and where the pod spec keeps them.
var probeTypes = []struct {
	typ    ProbeType
	field  string
	specOf func(*v1.Container) *v1.Probe
}{
	{Liveness, "livenessProbe", func(c *v1.Container) *v1.Probe { return c.LivenessProbe }},
	{Readiness, "readinessProbe", func(c *v1.Container) *v1.Probe { return c.ReadinessProbe }},
	{Startup, "startupProbe", func(c *v1.Container) *v1.Probe { return c.StartupProbe }},
}

// probeFieldName returns the container field name of a probe type, e.g. "readinessProbe".
func probeFieldName(t ProbeType) string {
	for _, pt := range probeTypes {
		if pt.typ == t {
			return pt.field
		}
	}
	return strings.ToLower(t.String()) + "Probe"
}

// DeclaredProbes returns the valid probes pod declares for src, and a problem
// for everything declared that will not run. It never panics, whatever the
// annotation holds, and does not modify pod.
//
// Probes are ordered by target container, then type. Targets come in pod
// spec order with restartable init containers (sidecars) first, then
// regular containers: the order the kubelet starts them. Types come in the
// order Liveness, Readiness, Startup.
//
// Problems are ordered: a whole-annotation problem (then there is nothing
// else from the annotation), the annotation's bad keys sorted by name, then
// invalid probes in the same order as probes, each probe's field errors in
// the API's validation order.
//
// A malformed annotation runs nothing from it; under ProbeSourceBoth the
// spec's probes still run. An annotation probe that is present but invalid
// still wins over the spec's probe of the same container and type: it is
// reported and neither runs.
func DeclaredProbes(pod *v1.Pod, src ProbeSource) ([]DeclaredProbe, []ProbeProblem) {
	if pod == nil {
		return nil, nil
	}
	targets, kinds := targetsOf(pod)

	var problems []ProbeProblem
	var annotated map[string]annotationEntry
	if raw, ok := pod.Annotations[ProbesAnnotation]; ok && src.fromAnnotation() {
		entries, whole := decodeAnnotation(raw)
		if whole != nil {
			problems = append(problems, *whole)
		} else {
			annotated, problems = checkAnnotationKeys(entries, kinds, problems)
		}
	}

	var probes []DeclaredProbe
	for _, tg := range targets {
		entry := annotated[tg.container.Name]
		for _, pt := range probeTypes {
			var probe *v1.Probe
			ext := &annotatedProbe{}
			fromAnnotation := true
			if ap := entry[pt.typ]; ap != nil {
				probe, ext = &ap.Probe, ap
			} else {
				if !src.fromSpec() {
					continue
				}
				probe, fromAnnotation = pt.specOf(tg.container), false
				if probe == nil {
					continue
				}
			}
			probe = probe.DeepCopy()
			setProbeDefaults(probe)
			errs := validateProbe(probe, pt.typ, tg.container)
			path := field.NewPath(pt.field)
			errs = append(errs, checkKeepAlive(probe, ext.KeepAlive, path)...)
			check, checkErrs := checkHTTPCheck(probe, ext.ExpectStatus, ext.ExpectBody, path)
			errs = append(errs, checkErrs...)
			period, timeout, timingErrs := checkSubSecond(ext.PeriodMs, ext.TimeoutMs, path)
			errs = append(errs, timingErrs...)
			tlsSpec, tlsErrs := checkTLS(probe, ext.TLS, pod.Spec.Volumes, path)
			errs = append(errs, tlsErrs...)
			fromPod, fromErrs := checkFrom(probe, ext.From, pod.Spec.HostNetwork, path)
			errs = append(errs, fromErrs...)
			if fromAnnotation {
				errs = append(errs, checkKillParity(&pod.Spec, tg.container, pt.typ, path)...)
			}
			if len(errs) > 0 {
				problems = append(problems, probeProblems(tg.container.Name, pt.typ, fromAnnotation, errs)...)
				continue
			}
			probes = append(probes, DeclaredProbe{
				Container:      *tg.container.DeepCopy(),
				InitContainer:  tg.init,
				Type:           pt.typ,
				Probe:          probe,
				FromAnnotation: fromAnnotation,
				KeepAlive:      ext.KeepAlive != nil && *ext.KeepAlive,
				HTTPCheck:      check,
				Period:         period,
				Timeout:        timeout,
				TLS:            tlsSpec,
				FromPod:        fromPod,
			})
		}
	}
	return probes, problems
}

// ProbeSpecEqual reports whether a and b declare the same probe once both are
// defaulted as the API does: an edit that changes nothing but spelled-out
// defaults (periodSeconds: 10, say), or that spells out what no value means
// (grpc.mode Plaintext, httpGet.protocol HTTP1), is not a change. Two nil
// probes are equal; nil and non-nil are not. Neither argument is modified.
func ProbeSpecEqual(a, b *v1.Probe) bool {
	if a == nil || b == nil {
		return a == b
	}
	da, db := a.DeepCopy(), b.DeepCopy()
	for _, p := range []*v1.Probe{da, db} {
		setProbeDefaults(p)
		if g := p.GRPC; g != nil && g.Mode != nil && *g.Mode == v1.GRPCProbeModePlaintext {
			g.Mode = nil
		}
		if h := p.HTTPGet; h != nil && h.Protocol != nil && *h.Protocol == v1.HTTPProtocolHTTP1 {
			h.Protocol = nil
		}
	}
	return equality.Semantic.DeepEqual(da, db)
}
