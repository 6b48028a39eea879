package probespec

import (
	"encoding/json"
	"fmt"
	"maps"
	"net/netip"
	"slices"
	"strings"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/probed-dev/probed/pkg/hostpolicy"
	"github.com/probed-dev/probed/pkg/restartpolicy"
)

// What adoption leaves with the kubelet (contract §8): adoption never leaves
// a pod worse off than under the kubelet, so a spec probe moves into the
// annotation only if probed would run it as the kubelet does. Each rule
// below answers "could the kubelet run this probe and probed not?" for one
// reason; the first that applies keeps the probe in the spec, and
// docs/webhook.md lists them. The webhook and `probed convert` both come
// here, so they leave the same probes.

// AdoptOptions is what adoption needs to know beyond the pod.
type AdoptOptions struct {
	// HostPolicy is the nodes' --probe-host-policy; "" is its default,
	// deny-node-local. A probe whose host it refuses whatever the pod's IPs
	// and the node's addresses stays with the kubelet.
	HostPolicy hostpolicy.Policy
	// RawSpec is the pod spec as the client sent it (JSON), if known. A
	// probe holding a field that this build's API types do not keep as
	// written stays with the kubelet, untouched. Nil checks nothing: a
	// caller that has only the decoded pod cannot tell.
	RawSpec []byte
	// APIServerGates are the API server's gates of alpha probe fields that
	// are on; with one off (the default), a probe that sets its field
	// stays with the kubelet.
	APIServerGates APIServerGates
}

// Left is a spec probe adoption left with the kubelet.
type Left struct {
	// Probe is "<container>/<probe field>".
	Probe string
	// Reason says why, in a sentence that names the rule.
	Reason string
}

func (l Left) String() string { return l.Probe + " stays with the kubelet: " + l.Reason }

// adoptSlot is one spec probe adoption looks at.
type adoptSlot struct {
	container *v1.Container
	sidecar   bool
	typ       ProbeType
	field     string
	probe     **v1.Probe
}

func (s adoptSlot) name() string { return s.container.Name + "/" + s.field }

// adoptRules are applied in order; each returns why the probe stays with the
// kubelet, or "".
var adoptRules = []func(j *adoptJudge, s adoptSlot) string{
	(*adoptJudge).windowsPod,
	(*adoptJudge).unknownFields,
	(*adoptJudge).droppedAlphaField,
	(*adoptJudge).sidecarStartup,
	(*adoptJudge).killParity,
	(*adoptJudge).execTooLarge,
	(*adoptJudge).invalid,
	(*adoptJudge).hostRefused,
	(*adoptJudge).podSecurityHost,
	(*adoptJudge).startupOfLeft,
	(*adoptJudge).annotationFull,
}

// adoptJudge holds what the rules share for one pod.
type adoptJudge struct {
	spec    *v1.PodSpec
	opts    AdoptOptions
	unknown map[string][]string
	guard   *hostpolicy.Guard
	// left is, per container, the liveness or readiness probe already
	// left with the kubelet (slots come liveness, readiness, startup).
	left map[string]string
	// entries is the annotation being built, size its encoded size, and
	// full says, per container judged, whether its probes would not fit.
	entries map[string]map[string]json.RawMessage
	size    *entriesSize
	full    map[string]bool
}

func newAdoptJudge(spec *v1.PodSpec, opts AdoptOptions, entries map[string]map[string]json.RawMessage) *adoptJudge {
	j := &adoptJudge{spec: spec, opts: opts, left: map[string]string{},
		entries: entries, size: newEntriesSize(entries), full: map[string]bool{}}
	if opts.RawSpec != nil {
		j.unknown = ProbeFieldsNotKept(opts.RawSpec)
	}
	// The node's own addresses are not known at admission: the guard judges
	// only what it refuses on every node.
	j.guard = hostpolicy.NewGuard(opts.HostPolicy, hostpolicy.GuardOptions{
		InterfaceAddrs: func() ([]netip.Addr, error) { return nil, nil },
	})
	return j
}

// leave returns why the probe in s stays with the kubelet, or "".
func (j *adoptJudge) leave(s adoptSlot) string {
	for _, rule := range adoptRules {
		if why := rule(j, s); why != "" {
			if s.typ != Startup && j.left[s.container.Name] == "" {
				j.left[s.container.Name] = s.field
			}
			return why
		}
	}
	return ""
}

// windowsPod: probed runs on Linux nodes only (its DaemonSet selects
// kubernetes.io/os: linux); on a Windows node nothing would run the probe.
func (j *adoptJudge) windowsPod(adoptSlot) string {
	if (j.spec.OS != nil && j.spec.OS.Name == v1.Windows) || j.spec.NodeSelector[v1.LabelOSStable] == string(v1.Windows) {
		return "the pod runs on Windows nodes, where probed does not run"
	}
	return ""
}

// unknownFields: a field the API types do not keep would vanish on the way
// into the annotation, and probed would run another probe than the kubelet.
func (j *adoptJudge) unknownFields(s adoptSlot) string {
	if fields := j.unknown[s.name()]; len(fields) > 0 {
		return fmt.Sprintf("it sets %s, which this build of probed does not know", quoteList(fields))
	}
	return ""
}

// droppedAlphaField: the API server drops an alpha probe field whose gate
// is off in PrepareForCreate, after mutating admission, so the kubelet
// runs the probe without it. Moved into the annotation, the field would
// stay and probed would run another probe: h2c where the kubelet speaks
// HTTP/1.1, TLS where it speaks plaintext. A value that changes nothing
// (HTTP1, Plaintext) moves.
func (j *adoptJudge) droppedAlphaField(s adoptSlot) string {
	p := *s.probe
	switch {
	case p.HTTPGet != nil && p.HTTPGet.Protocol != nil && *p.HTTPGet.Protocol != v1.HTTPProtocolHTTP1 && !j.opts.APIServerGates.H2CContainerProbe:
		return fmt.Sprintf("httpGet.protocol %s is alpha: the API server drops it after admission unless its H2CContainerProbe gate is on (--api-server-feature-gates), and the kubelet then probes over HTTP/1.1", *p.HTTPGet.Protocol)
	case p.GRPC != nil && p.GRPC.Mode != nil && *p.GRPC.Mode != v1.GRPCProbeModePlaintext && !j.opts.APIServerGates.GRPCContainerProbeTLS:
		return fmt.Sprintf("grpc.mode %s is alpha: the API server drops it after admission unless its GRPCContainerProbeTLS gate is on (--api-server-feature-gates), and the kubelet then probes in plaintext", *p.GRPC.Mode)
	}
	return ""
}

// sidecarStartup: the kubelet starts the next init container and the app
// containers once a sidecar is started, i.e. once its startup probe has
// succeeded; a startup probe it does not see counts as passed at once.
func (j *adoptJudge) sidecarStartup(s adoptSlot) string {
	if s.sidecar && s.typ == Startup {
		return "a sidecar's startup probe orders the pod's start-up, which only the kubelet does"
	}
	return ""
}

// killParity: a liveness or startup kill by probed must lead to the
// restart the kubelet's own kill leads to (restartpolicy.KillParity).
func (j *adoptJudge) killParity(s adoptSlot) string {
	return killParityGap(j.spec, s.container, s.typ)
}

// execTooLarge: probed refuses an exec command over its bounds
// (limits.go), which the kubelet runs.
func (j *adoptJudge) execTooLarge(s adoptSlot) string {
	if e := (*s.probe).Exec; e != nil {
		if errs := checkExecSize(e.Command, field.NewPath(s.field, "exec", "command")); len(errs) > 0 {
			return "probed would refuse it: " + errs[0].Error()
		}
	}
	return ""
}

// invalid: a probe probed would refuse (InvalidProbe) where the API server
// accepts it: a named port the container does not declare, which the
// kubelet only fails to resolve when it probes (the probe then never
// succeeds, and never kills), while probed refuses it and the validating
// webhook would refuse the pod. A probe the API server itself would refuse
// (no handler, a negative threshold) moves, and is refused with the
// daemon's words where the annotation is validated.
func (j *adoptJudge) invalid(s adoptSlot) string {
	problem := declaredProblem(j.spec, s)
	if problem == "" {
		return ""
	}
	// Again with every port name the probe uses declared: what remains is
	// what the API server refuses too.
	named := *j.spec
	named.InitContainers = slices.Clone(j.spec.InitContainers)
	named.Containers = slices.Clone(j.spec.Containers)
	c := restartpolicy.Container(&named, s.container.Name)
	c.Ports = slices.Clone(c.Ports)
	for _, name := range portNames(*s.probe) {
		c.Ports = append(c.Ports, v1.ContainerPort{Name: name, ContainerPort: 1})
	}
	if declaredProblem(&named, s) != "" {
		return ""
	}
	return "probed would refuse it: " + problem
}

// declaredProblem is the daemon's first problem with the probe in s, as
// the annotation would carry it in a pod with spec, or "".
func declaredProblem(spec *v1.PodSpec, s adoptSlot) string {
	b, err := json.Marshal(map[string]map[string]*v1.Probe{s.container.Name: {s.field: *s.probe}})
	if err != nil {
		return "it cannot be encoded: " + err.Error()
	}
	pod := &v1.Pod{Spec: *spec}
	pod.Annotations = map[string]string{ProbesAnnotation: string(b)}
	_, problems := DeclaredProbes(pod, ProbeSourceAnnotation)
	for _, p := range problems {
		if p.Type == nil || (p.Container == s.container.Name && *p.Type == s.typ) {
			return p.String()
		}
	}
	return ""
}

// portNames are the port names a probe refers to.
func portNames(p *v1.Probe) []string {
	var out []string
	for _, port := range []*intstr.IntOrString{httpPort(p), tcpPort(p)} {
		if port != nil && port.Type == intstr.String {
			out = append(out, port.StrVal)
		}
	}
	return out
}

func httpPort(p *v1.Probe) *intstr.IntOrString {
	if p.HTTPGet == nil {
		return nil
	}
	return &p.HTTPGet.Port
}

func tcpPort(p *v1.Probe) *intstr.IntOrString {
	if p.TCPSocket == nil {
		return nil
	}
	return &p.TCPSocket.Port
}

// hostRefused: --probe-host-policy refuses the probe's host on every node.
func (j *adoptJudge) hostRefused(s adoptSlot) string {
	path, host := probeHostOf(*s.probe)
	if host == "" || j.guard.Policy() == hostpolicy.Kubelet {
		return ""
	}
	refuse := func(err error) string {
		return fmt.Sprintf("%s %q: %v", path, host, err)
	}
	if j.guard.Policy() == hostpolicy.PodIPs {
		// Only the pod's own IPs are allowed, and they are not known yet.
		return refuse(fmt.Errorf("only the pod's own IPs are allowed, refused by --probe-host-policy=%s", hostpolicy.PodIPs))
	}
	if isLocalhostName(host) {
		a := netip.MustParseAddr("127.0.0.1")
		if err := j.guard.CheckAddr(a, nil); err != nil {
			return refuse(err)
		}
	}
	if err := j.guard.CheckHost(host, nil); err != nil {
		return refuse(err)
	}
	return ""
}

// podSecurityHost: Pod Security's baseline level (and so restricted)
// forbids host in probes from policy version 1.34 (KEP-4940), and judges
// the pod after mutating admission. A host moved into the annotation would
// escape that check; in the spec, Pod Security decides, as without probed.
// Adoption cannot tell the namespace's level (nor the cluster's default),
// so every host stays.
func (j *adoptJudge) podSecurityHost(s adoptSlot) string {
	path, host := probeHostOf(*s.probe)
	if host == "" {
		return ""
	}
	return fmt.Sprintf("it sets %s: Pod Security (baseline, 1.34+) forbids host in probes and judges the pod after admission webhooks, so it stays where Pod Security sees it", path)
}

// probeHostOf returns the field path and value of a network probe's host.
func probeHostOf(p *v1.Probe) (string, string) {
	switch {
	case p.HTTPGet != nil:
		return "httpGet.host", p.HTTPGet.Host
	case p.TCPSocket != nil:
		return "tcpSocket.host", p.TCPSocket.Host
	}
	return "", ""
}

// isLocalhostName: "localhost" and names under it always resolve to
// loopback (RFC 6761).
func isLocalhostName(host string) bool {
	h := strings.TrimSuffix(strings.ToLower(host), ".")
	return h == "localhost" || strings.HasSuffix(h, ".localhost")
}

// annotationFull: moved, the container's probes would make the annotation
// longer than MaxAnnotationBytes, and probed would run none of it. A
// container's probes stay or move together (all of its spec probes are
// counted, whatever the other rules say of them), so that none of them
// runs ungated by a startup probe left behind.
func (j *adoptJudge) annotationFull(s adoptSlot) string {
	c := s.container
	full, judged := j.full[c.Name]
	if !judged {
		inner := maps.Clone(j.entries[c.Name])
		if inner == nil {
			inner = map[string]json.RawMessage{}
		}
		for _, pt := range probeTypes {
			p := pt.specOf(c)
			if _, declared := inner[pt.field]; p == nil || declared {
				continue
			}
			b, err := json.Marshal(p)
			if err != nil {
				return "it cannot be encoded: " + err.Error()
			}
			inner[pt.field] = b
		}
		full = j.size.with(c.Name, inner) > MaxAnnotationBytes
		j.full[c.Name] = full
	}
	if !full {
		return ""
	}
	return fmt.Sprintf("moved, the container's probes would make annotation %q longer than its limit of %d bytes, and probed would run none of it",
		ProbesAnnotation, MaxAnnotationBytes)
}

// moved records that AdoptWith added a probe to container c's entry.
func (j *adoptJudge) moved(c string) { j.size.set(c, j.entries[c]) }

func quoteList(fields []string) string {
	q := make([]string, len(fields))
	for i, f := range fields {
		q[i] = fmt.Sprintf("%q", f)
	}
	return strings.Join(q, ", ")
}

// startupOfLeft: the kubelet runs a container's liveness and readiness
// probes only once its startup probe has passed; if one of them stays in
// the spec while the startup probe moved, the kubelet sees no startup
// probe and runs it from the start (a slow starter's liveness kills it).
func (j *adoptJudge) startupOfLeft(s adoptSlot) string {
	if s.typ != Startup || j.left[s.container.Name] == "" {
		return ""
	}
	return fmt.Sprintf("the container's %s stays with the kubelet, which runs it only once the startup probe has passed", j.left[s.container.Name])
}
