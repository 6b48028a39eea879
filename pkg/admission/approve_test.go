package admission

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	admissionv1 "k8s.io/api/admission/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	v1 "k8s.io/api/core/v1"

	"github.com/probed-dev/probed/pkg/probespec"
)

// fakeAccess lets the users it lists create pods/exec.
type fakeAccess struct {
	allowed map[string]bool
	err     error
	asked   []string
}

func (f *fakeAccess) MayExec(_ context.Context, u authenticationv1.UserInfo, ns, pod string) (bool, error) {
	f.asked = append(f.asked, u.Username+" "+ns+"/"+pod)
	return f.allowed[u.Username], f.err
}

func newApprover(access ExecAccess) *ReachApprover {
	return &ReachApprover{ExcludedNamespaces: []string{"kube-system"}, Access: access, Metrics: NewMetrics(prometheus.NewRegistry())}
}

const (
	createdProbes = `{"app": {"livenessProbe": {"exec": {"command": ["cat", "/tmp/healthy"]}}, "readinessProbe": {"httpGet": {"port": "http"}}}}`
	tokenProbes   = `{"app": {"livenessProbe": {"exec": {"command": ["cat", "/tmp/healthy"]}}, "readinessProbe": {"exec": {"command": ["sh", "-c", "cat /var/run/secrets/kubernetes.io/serviceaccount/token"]}}}}`
	timedProbes   = `{"app": {"livenessProbe": {"exec": {"command": ["cat", "/tmp/healthy"]}, "periodSeconds": 3}, "readinessProbe": {"httpGet": {"port": 8080, "path": "/x"}, "failureThreshold": 9}}}`
)

// approvedPod is annotated(probes) with the approval of approvedProbes
// ("-": none).
func approvedPod(t *testing.T, probes, approvedProbes string) *v1.Pod {
	t.Helper()
	pod := annotated(probes)
	if approvedProbes != "-" {
		v, err := probespec.ApproveReach(annotated(approvedProbes))
		if err != nil {
			t.Fatal(err)
		}
		pod.Annotations[probespec.ApprovedReachAnnotation] = v
	}
	return pod
}

func TestApproverApprovesWhatAPodIsCreatedWith(t *testing.T) {
	a := newApprover(&fakeAccess{})
	for name, pod := range map[string]*v1.Pod{
		"none":  approvedPod(t, createdProbes, "-"),
		"stale": approvedPod(t, createdProbes, `{"app": {"livenessProbe": {"exec": {"command": ["other"]}}}}`),
		"junk": func() *v1.Pod {
			p := annotated(createdProbes)
			p.Annotations[probespec.ApprovedReachAnnotation] = "junk"
			return p
		}(),
	} {
		raw := mustJSON(t, pod)
		resp := a.Handle(context.Background(), request(admissionv1.Create, podGVK, "apps", raw, nil))
		if !resp.Allowed {
			t.Fatalf("%s: refused: %v", name, resp.Result)
		}
		got := decodePod(t, applyPatch(t, raw, resp))
		want, _ := probespec.ApproveReach(annotated(createdProbes))
		if got.Annotations[probespec.ApprovedReachAnnotation] != want || got.Annotations[probespec.ProbesAnnotation] != createdProbes {
			t.Errorf("%s: annotations %v; want the approval %q and the probes as sent", name, got.Annotations, want)
		}
	}
	// Already approved: no patch. No annotation, malformed, excluded, or not a pod: left alone.
	same := approvedPod(t, createdProbes, createdProbes)
	if resp := a.Handle(context.Background(), request(admissionv1.Create, podGVK, "apps", mustJSON(t, same), nil)); !resp.Allowed || len(resp.Patches) > 0 {
		t.Errorf("already approved: %+v", resp)
	}
	noProbes := webPod()
	malformed := annotated(`{"app": [`)
	for name, req := range map[string]struct {
		pod *v1.Pod
		ns  string
	}{"no probes": {noProbes, "apps"}, "malformed": {malformed, "apps"}, "kube-system": {annotated(createdProbes), "kube-system"}} {
		if resp := a.Handle(context.Background(), request(admissionv1.Create, podGVK, req.ns, mustJSON(t, req.pod), nil)); !resp.Allowed || len(resp.Patches) > 0 {
			t.Errorf("%s: %+v; want allowed untouched", name, resp)
		}
	}
}

func TestApproverOnUpdate(t *testing.T) {
	approvalOf := func(probes string) string {
		v, _ := probespec.ApproveReach(annotated(probes))
		return v
	}
	stamped := approvedPod(t, createdProbes, createdProbes)
	for _, tc := range []struct {
		name       string
		old, new   *v1.Pod
		user       string
		sar        error
		allowed    bool
		code       int32
		msg        string
		wantStamp  string // "" leaves it as sent; "-" wants none
		wantAsked  bool
		wantPatchd bool
	}{
		{name: "free edit, no pods/exec", old: stamped, new: approvedPod(t, timedProbes, createdProbes), user: "patcher", allowed: true},
		{name: "token read, no pods/exec", old: stamped, new: approvedPod(t, tokenProbes, createdProbes), user: "patcher",
			code: http.StatusForbidden, wantAsked: true,
			msg: `probed.io/probes: container "app" readinessProbe: exec.command: Forbidden: changing what a probe runs or where it connects needs create on pods/exec for this pod, as kubectl exec does (user "patcher" may not create pods/exec on pod apps/web)`},
		{name: "token read, pods/exec", old: stamped, new: approvedPod(t, tokenProbes, createdProbes), user: "admin",
			allowed: true, wantAsked: true, wantPatchd: true, wantStamp: approvalOf(tokenProbes)},
		{name: "token read, the check fails", old: stamped, new: approvedPod(t, tokenProbes, createdProbes), user: "admin", sar: errors.New("apiserver away"),
			code: http.StatusServiceUnavailable, wantAsked: true, msg: `could not check whether "admin" may create pods/exec`},
		{name: "approved in the request (the policy judges it)", old: stamped, new: approvedPod(t, tokenProbes, tokenProbes), user: "patcher", allowed: true},
		{name: "no approval: free edit, no pods/exec (the policy judges it)", old: approvedPod(t, createdProbes, "-"), new: approvedPod(t, timedProbes, "-"),
			user: "patcher", allowed: true, wantAsked: true},
		{name: "no approval: free edit, pods/exec: approved now", old: approvedPod(t, createdProbes, "-"), new: approvedPod(t, timedProbes, "-"),
			user: "admin", allowed: true, wantAsked: true, wantPatchd: true, wantStamp: approvalOf(timedProbes)},
		{name: "no approval: token read, no pods/exec", old: approvedPod(t, createdProbes, "-"), new: approvedPod(t, tokenProbes, "-"),
			user: "patcher", code: http.StatusForbidden, wantAsked: true, msg: `readinessProbe: exec.command: Forbidden`},
		{name: "approval removed with an edit, pods/exec", old: stamped, new: approvedPod(t, tokenProbes, "-"), user: "admin",
			allowed: true, wantAsked: true, wantStamp: "-"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			access := &fakeAccess{allowed: map[string]bool{"admin": true}, err: tc.sar}
			a := newApprover(access)
			raw := mustJSON(t, tc.new)
			req := request(admissionv1.Update, podGVK, "apps", raw, mustJSON(t, tc.old))
			req.Name = tc.new.Name
			req.UserInfo = authenticationv1.UserInfo{Username: tc.user}
			resp := a.Handle(context.Background(), req)
			if resp.Allowed != tc.allowed {
				t.Fatalf("allowed = %v (%v); want %v", resp.Allowed, resp.Result, tc.allowed)
			}
			if !tc.allowed && (resp.Result.Code != tc.code || !strings.Contains(resp.Result.Message, tc.msg)) {
				t.Errorf("refusal %d %q; want %d containing %q", resp.Result.Code, resp.Result.Message, tc.code, tc.msg)
			}
			if (len(access.asked) > 0) != tc.wantAsked {
				t.Errorf("asked %v; want a SubjectAccessReview: %v", access.asked, tc.wantAsked)
			}
			if (len(resp.Patches) > 0) != tc.wantPatchd {
				t.Errorf("patches %v; want some: %v", resp.Patches, tc.wantPatchd)
			}
			got := decodePod(t, applyPatch(t, raw, resp))
			v, ok := got.Annotations[probespec.ApprovedReachAnnotation]
			switch tc.wantStamp {
			case "":
				if v != tc.new.Annotations[probespec.ApprovedReachAnnotation] {
					t.Errorf("approval changed to %q", v)
				}
			case "-":
				if ok {
					t.Errorf("approval %q; want none", v)
				}
			default:
				if v != tc.wantStamp {
					t.Errorf("approval %q; want %q", v, tc.wantStamp)
				}
			}
		})
	}
}

func decodePod(t *testing.T, raw []byte) *v1.Pod {
	t.Helper()
	pod := &v1.Pod{}
	if err := json.Unmarshal(raw, pod); err != nil {
		t.Fatal(err)
	}
	return pod
}
