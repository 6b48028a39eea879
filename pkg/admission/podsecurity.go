package admission

import (
	"context"
	"strconv"
	"strings"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/klog/v2"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/probed-dev/probed/pkg/probespec"
)

// ProbeHostRefuser is the validating handler for pods in namespaces that
// enforce Pod Security baseline or restricted. Both levels forbid host in
// probes from policy version 1.34 (KEP-4940), but Pod Security judges the
// pod spec and cannot see probed.io/probes. Its webhook's namespaceSelector
// picks the namespaces by their pod-security.kubernetes.io/enforce label,
// so the API server, not a read of namespaces, tells which they are. It
// promises:
//   - a pod whose probed.io/probes declares a probe with httpGet.host or
//     tcpSocket.host is refused on CREATE, and on UPDATE when the
//     annotation changed, naming each container, probe and field;
//   - anything else is allowed: a malformed or invalid annotation is the
//     Validator's to refuse, and an UPDATE that leaves the annotation as it
//     was never gets stuck.
type ProbeHostRefuser struct {
	// ExcludedNamespaces are not judged (kube-system).
	ExcludedNamespaces []string
	Metrics            *Metrics
}

var _ admission.Handler = (*ProbeHostRefuser)(nil)

// Handle implements admission.Handler.
func (r *ProbeHostRefuser) Handle(ctx context.Context, req admission.Request) admission.Response {
	resp, outcome := r.handle(req)
	r.Metrics.observe("probe-host", outcome)
	return resp
}

func (r *ProbeHostRefuser) handle(req admission.Request) (admission.Response, string) {
	if req.Kind.Group != "" || req.Kind.Kind != "Pod" {
		return admission.Allowed("not a pod"), OutcomeSkipped
	}
	obj, resp, outcome := annotationToJudge(req, r.ExcludedNamespaces)
	if obj == nil {
		return resp, outcome
	}
	msgs := probeHostProblems(obj.pod)
	if len(msgs) == 0 {
		return admission.Allowed("no probe host"), OutcomeAllowed
	}
	klog.V(2).InfoS("Refusing probe hosts where Pod Security forbids them", "pod", klog.KRef(req.Namespace, req.Name), "problems", msgs)
	return invalid(strings.Join(msgs, "\n")), OutcomeDenied
}

// probeHostProblems words each annotation probe of pod that sets a host
// as Pod Security words its check, in the daemon's problem form.
func probeHostProblems(pod *v1.Pod) []string {
	declared, _ := probespec.DeclaredProbes(pod, probespec.ProbeSourceAnnotation)
	var msgs []string
	for _, d := range declared {
		var path, host string
		switch p := d.Probe; {
		case p.HTTPGet != nil && p.HTTPGet.Host != "":
			path, host = "httpGet.host", p.HTTPGet.Host
		case p.TCPSocket != nil && p.TCPSocket.Host != "":
			path, host = "tcpSocket.host", p.TCPSocket.Host
		default:
			continue
		}
		typ := d.Type
		problem := probespec.ProbeProblem{
			Container: d.Container.Name, Type: &typ, Field: path, FromAnnotation: true,
			Detail: field.Forbidden(field.NewPath(path), "the namespace enforces Pod Security baseline or restricted, which forbid host in probes (1.34+) as they would in the pod spec; probe the pod's own IP: drop host "+strconv.Quote(host)).ErrorBody(),
		}
		msgs = append(msgs, probespec.ProbesAnnotation+": "+problem.String())
	}
	return msgs
}
