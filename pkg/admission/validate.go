package admission

import (
	"context"
	"net/http"
	"slices"
	"strings"

	admissionv1 "k8s.io/api/admission/v1"
	v1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/probed-dev/probed/pkg/probespec"
)

// Validator is the validating handler. It promises:
//   - a pod whose probed.io/probes annotation the daemon would report as
//     InvalidProbe (malformed, a key naming no container or sidecar, an
//     invalid probe) is refused on CREATE, and on UPDATE when the
//     annotation changed, with each problem's InvalidProbe text;
//   - the same for the pod template of a Deployment, ReplicaSet,
//     StatefulSet, DaemonSet, Job or CronJob, on CREATE and when the
//     template changed, so the error comes at `kubectl apply` and not as a
//     FailedCreate on a ReplicaSet; except that a template may name a
//     container another webhook will inject into its pods;
//   - an UPDATE that leaves the annotation (or the template) as it was is
//     allowed, so a pod admitted before the webhook ran never gets stuck
//     (a Job's finalizer removal, say);
//   - it judges the annotation as it will reach the node: validating
//     webhooks run after every mutating one, adoption included.
//
// The node's --probe-host-policy is the daemon's own and is not judged here.
type Validator struct {
	// ExcludedNamespaces are not validated (kube-system).
	ExcludedNamespaces []string
	Metrics            *Metrics
}

var _ admission.Handler = (*Validator)(nil)

// Handle implements admission.Handler.
func (v *Validator) Handle(ctx context.Context, req admission.Request) admission.Response {
	resp, outcome := v.handle(req)
	v.Metrics.observe("validate", outcome)
	return resp
}

func (v *Validator) handle(req admission.Request) (admission.Response, string) {
	obj, resp, outcome := annotationToJudge(req, v.ExcludedNamespaces)
	if obj == nil {
		return resp, outcome
	}
	_, problems := probespec.DeclaredProbes(obj.pod, probespec.ProbeSourceAnnotation)
	var msgs []string
	for _, p := range problems {
		if obj.path != "" && p.Type == nil && p.Container != "" {
			continue // a container another webhook may inject into the pods
		}
		msgs = append(msgs, obj.path+p.String())
	}
	if len(msgs) == 0 {
		return admission.Allowed("probes valid"), OutcomeAllowed
	}
	klog.V(2).InfoS("Refusing an invalid probes annotation", "kind", req.Kind.Kind,
		"object", klog.KRef(req.Namespace, req.Name), "problems", msgs)
	return invalid(strings.Join(msgs, "\n")), OutcomeDenied
}

// annotationToJudge returns the pod, or pod template, whose probed.io/probes
// a CREATE or UPDATE request asks to judge: one that has the annotation,
// outside the excluded namespaces, and on an UPDATE only when the
// annotation (or the template) changed, so that an object admitted before
// the webhook never gets stuck. Otherwise it returns nil and the answer.
func annotationToJudge(req admission.Request, excluded []string) (*probedObject, admission.Response, string) {
	if req.Operation != admissionv1.Create && req.Operation != admissionv1.Update || req.SubResource != "" {
		return nil, admission.Allowed("not a create or update"), OutcomeSkipped
	}
	if slices.Contains(excluded, req.Namespace) {
		return nil, admission.Allowed("excluded namespace"), OutcomeSkipped
	}
	obj, err := podOf(req.Kind, req.Object.Raw)
	if err != nil {
		return nil, admission.Errored(http.StatusBadRequest, err), OutcomeError
	}
	if obj == nil {
		return nil, admission.Allowed("no pod template"), OutcomeSkipped
	}
	if _, ok := obj.pod.Annotations[probespec.ProbesAnnotation]; !ok {
		return nil, admission.Allowed("no probes annotation"), OutcomeSkipped
	}
	if req.Operation == admissionv1.Update && len(req.OldObject.Raw) > 0 {
		old, err := podOf(req.Kind, req.OldObject.Raw)
		if err == nil && old != nil && obj.unchangedFrom(old) {
			return nil, admission.Allowed("probes unchanged"), OutcomeSkipped
		}
	}
	return obj, admission.Response{}, ""
}

// probedObject is the pod, or pod template, a request carries.
type probedObject struct {
	pod *v1.Pod
	// path locates a template in its object, e.g. "spec.template: "; ""
	// for a pod.
	path string
}

// unchangedFrom reports whether nothing that the validation judges
// changed: for a pod the annotation (its containers cannot change, bar
// images), for a template the whole template.
func (o *probedObject) unchangedFrom(old *probedObject) bool {
	if o.path == "" {
		a, aok := o.pod.Annotations[probespec.ProbesAnnotation]
		b, bok := old.pod.Annotations[probespec.ProbesAnnotation]
		return aok == bok && a == b
	}
	return templateEqual(o.pod, old.pod)
}
