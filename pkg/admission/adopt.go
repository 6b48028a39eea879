// Package admission is the adoption webhook's request handling (contract
// §8): Adopter hands a new pod's spec probes to probed, Validator rejects a
// probed.io/probes annotation the daemon would refuse. Both judge a pod with
// pkg/probespec, the daemon's own code, so a probe is valid or invalid, and
// worded, the same at admission as on the node.
//
// The handlers are controller-runtime admission.Handlers: the library
// decodes the AdmissionReview and encodes the answer; the handlers hold the
// decisions only.
package admission

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"

	admissionv1 "k8s.io/api/admission/v1"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/klog/v2"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/probed-dev/probed/pkg/hostpolicy"
	"github.com/probed-dev/probed/pkg/probespec"
)

// Adopter is the mutating handler. It promises:
//   - a pod it is asked about on CREATE has, once patched, no liveness,
//     readiness or startup probe left in the spec of a container or sidecar:
//     each is in probed.io/probes (the user's own entry wins), with the
//     probed.io/ready readiness gate and probed.io/adopted recording what
//     moved (probespec.Adopt);
//   - the patch touches only those fields, so whatever else the request
//     holds, known to this build or not, reaches the API server as sent;
//   - asked again about the same pod (reinvocation), it patches nothing;
//   - it never patches a pod of probed's own, of an excluded namespace, or
//     one opted out with probed.io/inject: "false";
//   - a malformed annotation is refused with the daemon's InvalidProbe
//     text, rather than admitted and reported after scheduling;
//   - a probe probed would not run as the kubelet does stays in the spec,
//     untouched, and the response carries a warning that names it and says
//     why (probespec's adoption rules, judged on the object as sent);
//     among them what the API server still judges or changes after
//     mutating admission: a probe host, which Pod Security judges, and an
//     alpha field whose gate is off, which it drops.
type Adopter struct {
	Scope Scope
	// HostPolicy is the nodes' --probe-host-policy: a probe whose host it
	// refuses on every node stays with the kubelet.
	HostPolicy hostpolicy.Policy
	// APIServerGates are the API server's gates of alpha probe fields that
	// are on (--api-server-feature-gates); a probe whose field the API
	// server would drop after admission stays with the kubelet.
	APIServerGates probespec.APIServerGates
	Metrics        *Metrics
}

var _ admission.Handler = (*Adopter)(nil)

// Handle implements admission.Handler.
func (a *Adopter) Handle(ctx context.Context, req admission.Request) admission.Response {
	resp, outcome := a.handle(req)
	a.Metrics.observe("adopt", outcome)
	return resp
}

func (a *Adopter) handle(req admission.Request) (admission.Response, string) {
	if req.Operation != admissionv1.Create || req.Kind.Group != "" || req.Kind.Kind != "Pod" || req.SubResource != "" {
		return admission.Allowed("not a pod being created"), OutcomeSkipped
	}
	pod := &v1.Pod{}
	if err := json.Unmarshal(req.Object.Raw, pod); err != nil {
		return admission.Errored(http.StatusBadRequest, err), OutcomeError
	}
	ns := req.Namespace
	if ns == "" {
		ns = pod.Namespace
	}
	if why := a.Scope.skip(ns, &pod.ObjectMeta); why != "" {
		return admission.Allowed(why), OutcomeSkipped
	}
	adopted := pod.DeepCopy()
	adoption, err := probespec.AdoptWith(&adopted.ObjectMeta, &adopted.Spec, probespec.AdoptOptions{
		HostPolicy:     a.HostPolicy,
		RawSpec:        rawSpec(req.Object.Raw),
		APIServerGates: a.APIServerGates,
	})
	if err != nil {
		klog.V(2).InfoS("Refusing a pod with a malformed probes annotation", "pod", podRef(ns, pod), "problem", err.Error())
		return invalid(err.Error()), OutcomeDenied
	}
	warnings := leftWarnings(adoption.Left)
	if len(adoption.Left) > 0 {
		klog.V(2).InfoS("Leaving probes with the kubelet", "pod", podRef(ns, pod), "left", warnings)
		a.Metrics.left(adoption.Left)
	}
	if !adoption.Changed() {
		return admission.Allowed("nothing to adopt").WithWarnings(warnings...), OutcomeUnchanged
	}
	klog.V(2).InfoS("Adopting probes", "pod", podRef(ns, pod), "moved", adoption.Moved, "kept", adoption.Kept, "gateAdded", adoption.GateAdded)
	return admission.Patched("probes adopted by probed", podPatch(pod, adopted)...).WithWarnings(warnings...), OutcomeAdopted
}

// rawSpec is the "spec" of the object as sent, for the adoption rules'
// comparison with what the typed decode kept; nil if there is none.
func rawSpec(raw []byte) []byte {
	var obj struct {
		Spec json.RawMessage `json:"spec"`
	}
	if err := json.Unmarshal(raw, &obj); err != nil {
		return nil
	}
	return obj.Spec
}

// maxWarningRunes is what the API server passes on of one warning whole
// (k8s.io/apiserver truncates longer ones once the total is large).
const maxWarningRunes = 256

// leftWarnings words each probe left with the kubelet as one admission
// warning, e.g. `probed: app/livenessProbe stays with the kubelet: ...`.
func leftWarnings(left []probespec.Left) []string {
	out := make([]string, 0, len(left))
	for _, l := range left {
		w := []rune("probed: " + l.String())
		if len(w) > maxWarningRunes {
			w = append(w[:maxWarningRunes-1], '…')
		}
		out = append(out, string(w))
	}
	return out
}

// invalid is a refusal with the 422 Invalid status the API server gives
// an object that fails validation.
func invalid(msg string) admission.Response {
	return admission.Response{AdmissionResponse: admissionv1.AdmissionResponse{
		Allowed: false,
		Result:  &metav1.Status{Code: http.StatusUnprocessableEntity, Reason: metav1.StatusReasonInvalid, Message: msg},
	}}
}

// podRef names a pod for the log; a pod being created by a controller has
// only a generateName.
func podRef(ns string, pod *v1.Pod) klog.ObjectRef {
	name := pod.Name
	if name == "" {
		name = strings.TrimSuffix(pod.GenerateName, "-") + "-<generated>"
	}
	return klog.ObjectRef{Namespace: ns, Name: name}
}
