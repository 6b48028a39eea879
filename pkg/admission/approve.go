package admission

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"slices"
	"strings"

	admissionv1 "k8s.io/api/admission/v1"
	v1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/probed-dev/probed/pkg/probespec"
)

// ReachApprover is the mutating handler that keeps probed.io/approved-reach
// (probespec.ApprovedReachAnnotation): what the pod's probes may run, or
// where they may connect beyond the pod's own IP. It promises:
//   - on CREATE of a pod with probed.io/probes, the pod leaves with the
//     approval of what its probes declare then: the creator chose them, as
//     it chose the container's command (a stale value the creator sent is
//     replaced). It runs after adoption, so adopted probes are approved;
//   - on UPDATE by a user allowed to create pods/exec on the pod (asked
//     with a SubjectAccessReview), the approval becomes that of the edited
//     probes, so such a user's edit runs; an approval that user removed
//     stays removed;
//   - on UPDATE by any other user, an edit that changes what a probe runs
//     or where it connects, and that the pod's approval does not cover, is
//     refused (403), naming each probe; every other edit is let through
//     unchanged (periods, thresholds, timeouts, ports and paths on the
//     pod's IP);
//   - it patches nothing but that one annotation.
//
// The daemon judges the same annotation itself, and the
// ValidatingAdmissionPolicy probed-probe-reach lets only a pods/exec user
// change it, so nothing here is needed for safety while the webhook is
// down: only for the approval of new pods and for precise refusals.
type ReachApprover struct {
	// ExcludedNamespaces are never handled (kube-system, probed's own).
	ExcludedNamespaces []string
	Access             ExecAccess
	Metrics            *Metrics
}

var _ admission.Handler = (*ReachApprover)(nil)

// Handle implements admission.Handler.
func (a *ReachApprover) Handle(ctx context.Context, req admission.Request) admission.Response {
	resp, outcome := a.handle(ctx, req)
	a.Metrics.observe("approve", outcome)
	return resp
}

func (a *ReachApprover) handle(ctx context.Context, req admission.Request) (admission.Response, string) {
	if req.Operation != admissionv1.Create && req.Operation != admissionv1.Update ||
		req.Kind.Group != "" || req.Kind.Kind != "Pod" || req.SubResource != "" {
		return admission.Allowed("not a pod being created or updated"), OutcomeSkipped
	}
	if slices.Contains(a.ExcludedNamespaces, req.Namespace) {
		return admission.Allowed("excluded namespace"), OutcomeSkipped
	}
	pod := &v1.Pod{}
	if err := json.Unmarshal(req.Object.Raw, pod); err != nil {
		return admission.Errored(http.StatusBadRequest, err), OutcomeError
	}
	if _, ok := pod.Annotations[probespec.ProbesAnnotation]; !ok {
		return admission.Allowed("no probes annotation"), OutcomeSkipped
	}
	want, err := probespec.ApproveReach(pod)
	if err != nil {
		return admission.Allowed("malformed probes annotation (the validating webhook refuses it)"), OutcomeSkipped
	}
	if req.Operation == admissionv1.Create {
		if cur, ok := pod.Annotations[probespec.ApprovedReachAnnotation]; ok && cur == want {
			return admission.Allowed("reach approved"), OutcomeUnchanged
		}
		return approved(pod, want), OutcomeApproved
	}
	old := &v1.Pod{}
	if err := json.Unmarshal(req.OldObject.Raw, old); err != nil {
		return admission.Errored(http.StatusBadRequest, err), OutcomeError
	}
	return a.update(ctx, req, old, pod, want)
}

func (a *ReachApprover) update(ctx context.Context, req admission.Request, old, pod *v1.Pod, want string) (admission.Response, string) {
	cur, stamped := pod.Annotations[probespec.ApprovedReachAnnotation]
	oldCur, wasStamped := old.Annotations[probespec.ApprovedReachAnnotation]
	if old.Annotations[probespec.ProbesAnnotation] == pod.Annotations[probespec.ProbesAnnotation] && oldCur == cur && stamped == wasStamped {
		return admission.Allowed("probes unchanged"), OutcomeSkipped
	}
	if stamped && cur == want {
		return admission.Allowed("reach approved"), OutcomeAllowed
	}
	edits, err := probespec.UnapprovedReachEdits(old, pod)
	if err != nil {
		return admission.Allowed("malformed probes annotation (the validating webhook refuses it)"), OutcomeSkipped
	}
	// Nothing this request changes needs approval; a pod without any is
	// still approved below for a pods/exec user, so that its later edits of
	// timing need none.
	if len(edits) == 0 && (stamped || wasStamped) {
		return admission.Allowed("no probe's reach changed"), OutcomeAllowed
	}
	ref := klog.KRef(req.Namespace, req.Name)
	may, err := a.Access.MayExec(ctx, req.UserInfo, req.Namespace, req.Name)
	if err != nil {
		klog.ErrorS(err, "Checking whether a user may create pods/exec", "pod", ref, "user", req.UserInfo.Username)
		if len(edits) > 0 {
			return admission.Errored(http.StatusServiceUnavailable,
				fmt.Errorf("%s (could not check whether %q may create pods/exec, which this edit needs: %v)", joinProblems(edits), req.UserInfo.Username, err)), OutcomeError
		}
		return admission.Allowed("could not check pods/exec; nothing approved"), OutcomeError
	}
	if !may {
		if len(edits) > 0 {
			klog.V(2).InfoS("Refusing a probe edit that needs pods/exec", "pod", ref, "user", req.UserInfo.Username, "problems", joinProblems(edits))
			return admission.Denied(fmt.Sprintf("%s (user %q may not create pods/exec on pod %s)", joinProblems(edits), req.UserInfo.Username, ref)), OutcomeDenied
		}
		return admission.Allowed("no pods/exec: nothing approved"), OutcomeAllowed
	}
	if wasStamped && !stamped {
		return admission.Allowed("approval removed by a user who may create pods/exec"), OutcomeAllowed
	}
	klog.V(2).InfoS("Approving the reach of edited probes", "pod", ref, "user", req.UserInfo.Username)
	return approved(pod, want), OutcomeApproved
}

// approved patches the approval value want into pod's annotations.
func approved(pod *v1.Pod, want string) admission.Response {
	after := maps.Clone(pod.Annotations)
	after[probespec.ApprovedReachAnnotation] = want
	return admission.Patched("reach approved by probed", appendAnnotationOps(nil, pod.Annotations, after)...)
}

func joinProblems(ps []probespec.ProbeProblem) string {
	msgs := make([]string, 0, len(ps))
	for _, p := range ps {
		msgs = append(msgs, p.String())
	}
	return probespec.ProbesAnnotation + ": " + strings.Join(msgs, "; ")
}
