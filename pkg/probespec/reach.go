package probespec

// A probe's reach, and its approval (docs/security.md, "What a pod's
// author, a namespace editor and a node can make probed do").
//
// Changing what runs inside a running container needs the right that
// kubectl exec needs: create on pods/exec. Anyone who may patch a pod may
// edit probed.io/probes, so the parts of a probe that decide what it runs
// or where it connects (its reach) are approved once, by whoever created
// the pod or by a user with that right, and recorded per probe as a digest
// in the ApprovedReachAnnotation. The digest is of the parsed probe, never
// of the annotation's text, so JSON or YAML, key order, white space and
// escapes do not change it. What stays freely editable is cleared before
// hashing: timing, thresholds, and where on the pod's own IP a network
// probe goes, when it is read as the pod's own answer (clearFree).
// Everything else counts, including fields a newer k8s.io/api
// brings, until they are deliberately added to clearFree.

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"slices"
	"sort"
	"strings"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// ApprovedReachAnnotation records what the pod's probes may run or reach
// beyond the pod's own IP: one digest per probe of probed.io/probes that
// has any reach. Its value is "v1" followed by sorted
// ",<container>/<probe field>=<sha256 hex>" entries, e.g.
//
//	v1,app/livenessProbe=9f86d081884c7d65...
//
// "v1" alone approves no reach. The adoption webhook sets it when a pod is
// created, and when a user allowed to create pods/exec on the pod edits
// its probes; a ValidatingAdmissionPolicy lets only such a user change it.
const ApprovedReachAnnotation = "probed.io/approved-reach"

// reachVersion is the value's prefix, and is hashed into every digest.
const reachVersion = "v1"

// probeReach is one probe's reach.
type probeReach struct {
	container string
	typ       ProbeType
	digest    string
	// fields names what makes up the reach, e.g. "exec.command", "httpGet.host".
	fields []string
}

// clearFree zeroes, in a copy of the probe, what anyone who may patch the
// pod may change: timing, thresholds, grace, and where on the pod's own IP
// a network probe goes (path, scheme, protocol, port, the gRPC service and
// mode). Port, path and scheme are free only where the probe goes to the
// pod's own IP and is read as the pod's own answer: not with a host, not
// with a Host header (a proxy in the pod routes by it), not with a body
// check (bodyCheck), whose pass or fail reads what the path answers. On a
// hostNetwork pod the pod's IP is the node's, where a port can be any of
// the node's services, so the port counts as reach there.
func clearFree(p *v1.Probe, hostNetwork, bodyCheck bool) {
	p.InitialDelaySeconds, p.TimeoutSeconds, p.PeriodSeconds = 0, 0, 0
	p.SuccessThreshold, p.FailureThreshold = 0, 0
	p.TerminationGracePeriodSeconds = nil
	if h := p.HTTPGet; h != nil {
		h.Protocol = nil
		if httpAimFree(h, bodyCheck) {
			h.Path, h.Scheme = "", ""
			if !hostNetwork {
				h.Port = intstr.IntOrString{}
			}
		}
	}
	if t := p.TCPSocket; t != nil && t.Host == "" && !hostNetwork {
		t.Port = intstr.IntOrString{}
	}
	if g := p.GRPC; g != nil {
		// gRPC has no host: it always goes to the pod's IP.
		g.Service, g.Mode = nil, nil
		if !hostNetwork {
			g.Port = 0
		}
	}
}

// httpAimFree reports whether an httpGet probe's path, scheme and port
// (but on a hostNetwork pod) are free: it goes to the pod's own IP, with
// no Host header, and checks no body.
func httpAimFree(h *v1.HTTPGetAction, bodyCheck bool) bool {
	return h.Host == "" && !hasHostHeader(h.HTTPHeaders) && !bodyCheck
}

// hasHostHeader reports whether headers set Host, which the request then
// carries instead of the address it goes to (header names are
// case-insensitive).
func hasHostHeader(headers []v1.HTTPHeader) bool {
	return slices.ContainsFunc(headers, func(h v1.HTTPHeader) bool { return strings.EqualFold(h.Name, "Host") })
}

// reachOf returns the reach of one annotation probe at key
// ("<container>/<probe field>"); ok is false when it has none. The
// extensions keepAlive, expectStatus, grpc.mode and the millisecond
// timings are free; expectBody is reach (what the pod answers on any path,
// read back through the condition), and so are probed.io/tls's
// clientCertificate (a request made with the pod's credential) and
// probed.io/from Pod (a probe sent as the pod, to what listens only on its
// loopback); the rest of probed.io/tls only narrows what passes.
func reachOf(key string, ap *annotatedProbe, hostNetwork bool) (r probeReach, ok bool) {
	p := ap.Probe.DeepCopy()
	clearFree(p, hostNetwork, ap.ExpectBody != nil)
	bare := &v1.Probe{}
	if p.HTTPGet != nil {
		bare.HTTPGet = &v1.HTTPGetAction{}
	}
	if p.TCPSocket != nil {
		bare.TCPSocket = &v1.TCPSocketAction{}
	}
	if p.GRPC != nil {
		bare.GRPC = &v1.GRPCAction{}
	}
	var client *clientCertField
	if ap.TLS != nil {
		client = ap.TLS.ClientCertificate
	}
	// Sent from inside the pod, a probe acts as the pod: it reaches what
	// listens only on the pod's loopback, which nothing outside the pod
	// could reach before.
	var from string
	if ap.From != nil && *ap.From != FromNode {
		from = *ap.From
	}
	if ap.ExpectBody == nil && client == nil && from == "" && equality.Semantic.DeepEqual(p, bare) {
		return probeReach{}, false
	}
	// json.Marshal is deterministic for these types (no maps), and leaves
	// out empty hosts, header lists and commands alike, whatever the input
	// spelled.
	b, err := json.Marshal(struct {
		Probe      *v1.Probe        `json:"probe"`
		ExpectBody *string          `json:"expectBody,omitempty"`
		ClientCert *clientCertField `json:"clientCertificate,omitempty"`
		From       string           `json:"from,omitempty"`
	}{p, ap.ExpectBody, client, from})
	if err != nil { // cannot happen for these types; refuse rather than approve
		b = []byte(err.Error())
	}
	h := sha256.New()
	fmt.Fprintf(h, "%s %s\n%s\n", ApprovedReachAnnotation, reachVersion, key)
	h.Write(b)
	return probeReach{digest: hex.EncodeToString(h.Sum(nil)), fields: reachFields(p, ap.ExpectBody != nil, client != nil, from != "", hostNetwork)}, true
}

// reachFields names the parts of a cleared probe that make up its reach.
func reachFields(p *v1.Probe, body, clientCert, from, hostNetwork bool) []string {
	var out []string
	add := func(cond bool, name string) {
		if cond {
			out = append(out, name)
		}
	}
	add(p.Exec != nil, "exec.command")
	if h := p.HTTPGet; h != nil {
		aimed := !httpAimFree(h, body)
		add(h.Host != "", "httpGet.host")
		add(hostNetwork || aimed, "httpGet.port")
		add(aimed, "httpGet.path")
		add(aimed, "httpGet.scheme")
		add(len(h.HTTPHeaders) > 0, "httpGet.httpHeaders")
	}
	if t := p.TCPSocket; t != nil {
		add(t.Host != "", "tcpSocket.host")
		add(hostNetwork || t.Host != "", "tcpSocket.port")
	}
	add(p.GRPC != nil && hostNetwork, "grpc.port")
	add(body, ExpectBodyField)
	add(clientCert, TLSField+".clientCertificate")
	add(from, FromField)
	if len(out) == 0 { // a field newer than this list
		for _, h := range probeHandlers {
			add(h.set(&p.ProbeHandler), h.name)
		}
	}
	return out
}

// reachKey names a probe slot: "<container>/<probe field>".
func reachKey(container string, field string) string { return container + "/" + field }

// podReach returns the reach of every probe in pod's annotation that
// targets one of its containers or sidecars, valid or not, by reachKey; an error when the annotation is malformed. A probe
// that is invalid today has its reach approved too, so that fixing, say,
// its port name later needs no approval.
func podReach(pod *v1.Pod) (map[string]probeReach, error) {
	out := map[string]probeReach{}
	raw, ok := pod.Annotations[ProbesAnnotation]
	if !ok {
		return out, nil
	}
	entries, whole := decodeAnnotation(raw)
	if whole != nil {
		return nil, fmt.Errorf("%s", whole.String())
	}
	_, kinds := targetsOf(pod)
	for c, entry := range entries {
		// Only a probe target's probes can ever run (containers are
		// immutable), and their names, DNS labels, keep the value's syntax.
		if k := kinds[c]; k != targetRegular && k != targetSidecar {
			continue
		}
		for _, pt := range probeTypes {
			if ap := entry[pt.typ]; ap != nil {
				k := reachKey(c, pt.field)
				if r, ok := reachOf(k, ap, pod.Spec.HostNetwork); ok {
					r.container, r.typ = c, pt.typ
					out[k] = r
				}
			}
		}
	}
	return out, nil
}

// ApproveReach returns the ApprovedReachAnnotation value that approves
// what every probe of pod's probed.io/probes runs or reaches now; an
// error, and no value, when the annotation is malformed.
func ApproveReach(pod *v1.Pod) (string, error) {
	reach, err := podReach(pod)
	if err != nil {
		return "", err
	}
	return formatApproval(reach), nil
}

func formatApproval(reach map[string]probeReach) string {
	keys := make([]string, 0, len(reach))
	for k := range reach {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var b strings.Builder
	b.WriteString(reachVersion)
	for _, k := range keys {
		b.WriteString("," + k + "=" + reach[k].digest)
	}
	return b.String()
}

// parseApproval reads an ApprovedReachAnnotation value strictly: the
// version, then entries whose keys name a probe field, each once, with a
// digest of 64 lower-case hex digits.
func parseApproval(v string) (map[string]string, error) {
	parts := strings.Split(v, ",")
	if parts[0] != reachVersion {
		return nil, fmt.Errorf("must start with %q", reachVersion)
	}
	out := make(map[string]string, len(parts)-1)
	for _, e := range parts[1:] {
		k, digest, ok := strings.Cut(e, "=")
		c, f, okKey := strings.Cut(k, "/")
		switch {
		case !ok || !okKey || c == "" || !isProbeField(f):
			return nil, fmt.Errorf("entry %q is not <container>/<livenessProbe|readinessProbe|startupProbe>=<digest>", e)
		case !isDigest(digest):
			return nil, fmt.Errorf("entry %q: the digest must be 64 lower-case hex digits", k)
		}
		if _, dup := out[k]; dup {
			return nil, fmt.Errorf("entry %q is there twice", k)
		}
		out[k] = digest
	}
	return out, nil
}

func isDigest(s string) bool {
	if len(s) != sha256.Size*2 {
		return false
	}
	for _, r := range s {
		if (r < '0' || r > '9') && (r < 'a' || r > 'f') {
			return false
		}
	}
	return true
}

// CheckReach keeps the declared probes whose reach the pod's approved
// reach covers, and appends a problem (an InvalidProbe) for each other
// one. Probes from the pod spec are the creator's own and immutable, and
// always kept, as are probes with no reach.
//
// A pod without the annotation keeps every probe unless requireApproval:
// the ValidatingAdmissionPolicy probed ships lets only a user allowed to
// create pods/exec change probed.io/probes on such a pod. A malformed
// value approves nothing.
func CheckReach(pod *v1.Pod, declared []DeclaredProbe, problems []ProbeProblem, requireApproval bool) ([]DeclaredProbe, []ProbeProblem) {
	if !slices.ContainsFunc(declared, func(d DeclaredProbe) bool { return d.FromAnnotation }) {
		return declared, problems
	}
	value, stamped := pod.Annotations[ApprovedReachAnnotation]
	if !stamped && !requireApproval {
		return declared, problems
	}
	reach, readErr := podReach(pod)
	var approved map[string]string
	var why string
	var err error
	switch {
	case readErr != nil: // a probe was declared from it; should it not parse, nothing is approved
		why = fmt.Sprintf("what the probe runs or where it connects could not be read (%v), so nothing approves it", readErr)
	case !stamped:
		why = fmt.Sprintf("the pod has no %s, and this node runs with --require-approved-reach: "+
			"a user allowed to create pods/exec on the pod must approve what this probe runs or where it connects", ApprovedReachAnnotation)
	default:
		if approved, err = parseApproval(value); err != nil {
			why = fmt.Sprintf("%s is malformed (%v), so it approves nothing", ApprovedReachAnnotation, err)
		}
	}
	kept := declared[:0:0]
	for _, d := range declared {
		k := reachKey(d.Container.Name, probeFieldName(d.Type))
		r, has := reach[k]
		if !d.FromAnnotation || (!has && readErr == nil) || (why == "" && approved[k] == r.digest) {
			kept = append(kept, d)
			continue
		}
		detail := why
		if detail == "" {
			detail = fmt.Sprintf("changed after the pod was created without pods/exec approval: %s does not cover what this probe "+
				"runs or where it connects (a user allowed to create pods/exec on the pod must approve it)", ApprovedReachAnnotation)
		}
		t := d.Type
		problems = append(problems, ProbeProblem{
			Container:      d.Container.Name,
			Type:           &t,
			Field:          strings.Join(r.fields, ", "),
			Detail:         field.ErrorTypeForbidden.String() + ": " + detail,
			FromAnnotation: true,
		})
	}
	return kept, problems
}

// UnapprovedReachEdits returns a problem for each probe of new's
// annotation whose reach an update from old changes (a new probe with any
// reach counts) and that new's ApprovedReachAnnotation does not cover; on
// a pod without that annotation, for each probe whose reach changed at
// all. The adoption webhook refuses these edits from a user who may not
// create pods/exec on the pod. A malformed annotation in new is an error
// (the validating webhook refuses it); a malformed one in old counts as
// having declared nothing.
func UnapprovedReachEdits(old, new *v1.Pod) ([]ProbeProblem, error) {
	after, err := podReach(new)
	if err != nil {
		return nil, err
	}
	before, err := podReach(old)
	if err != nil {
		before = map[string]probeReach{}
	}
	var approved map[string]string
	if v, ok := new.Annotations[ApprovedReachAnnotation]; ok {
		approved, _ = parseApproval(v) // malformed: nothing is approved
		if approved == nil {
			approved = map[string]string{}
		}
	}
	keys := make([]string, 0, len(after))
	for k := range after {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var out []ProbeProblem
	for _, k := range keys {
		r := after[k]
		if before[k].digest == r.digest || (approved != nil && approved[k] == r.digest) {
			continue
		}
		t := r.typ
		out = append(out, ProbeProblem{
			Container:      r.container,
			Type:           &t,
			Field:          strings.Join(r.fields, ", "),
			Detail:         field.ErrorTypeForbidden.String() + ": changing what a probe runs or where it connects needs create on pods/exec for this pod, as kubectl exec does",
			FromAnnotation: true,
		})
	}
	return out, nil
}

// isProbeField reports whether f is a probe's field name, e.g. "livenessProbe".
func isProbeField(f string) bool {
	for _, pt := range probeTypes {
		if pt.field == f {
			return true
		}
	}
	return false
}
