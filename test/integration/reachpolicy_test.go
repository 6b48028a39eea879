//go:build integration

package integration

import (
	"fmt"
	"strings"
	"testing"
	"time"

	admissionv1 "k8s.io/api/admissionregistration/v1"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"

	"github.com/probed-dev/probed/pkg/probespec"
	"github.com/probed-dev/probed/pkg/reachpolicy"
)

// TestReachPolicyChecker (issue 20, item 1; issue 30, item 8): probed,
// with its own token and deploy/'s ClusterRole, watches the probe-reach
// policy on the real API server.
//   - deploy/'s policy and binding, as TestMain applies them, count as in
//     force.
//   - A policy that is not there is reported at start in the metric and a
//     Warning event on the node, and probed then holds probe edits itself:
//     a patch of a running pod that adds an exec probe is refused by the
//     daemon (InvalidProbe), the probe the pod had keeps running, the
//     record is in the pod's status (reach.probed.io), and all of it holds
//     across a restart of probed. (The API server here runs deploy/'s policy
//     under its own name; probed watches another name, which is missing, as
//     on a cluster without the policy. The edit is made by a user the real
//     policy lets through.)
//   - A copy of deploy/'s policy whose binding only warns, or whose
//     expression was changed, is not in force.
//   - Once the copy is made right, while probed runs, it is in force at
//     once, and the edit it held runs.
func TestReachPolicyChecker(t *testing.T) {
	e := newEnv(t)
	ctx := e.ctx

	p := e.startProbed()
	const deployed = `probed_probe_reach_policy_in_force{policy="probed-probe-reach"} 1`
	eventually(t, deployed, 20*time.Second, func() bool { return len(p.metricLines(deployed)) == 1 })
	p.Shutdown()

	created := probes{"app": {"livenessProbe": execSpec("cat", "/tmp/healthy")}}
	pod := e.createPod("held", mustJSON(created), false, container{name: "app"})
	e.runPod(pod, loopbackIP(), time.Minute)

	name := "it-probe-reach-" + e.node
	missingEvent := func(why string) func() bool {
		return func() bool {
			list, err := client.CoreV1().Events(metav1.NamespaceDefault).List(ctx, metav1.ListOptions{
				FieldSelector: fields.Set{"involvedObject.kind": "Node", "involvedObject.name": e.node, "reason": reachpolicy.ReasonMissing}.String(),
			})
			if err != nil {
				return false
			}
			for _, ev := range list.Items {
				if ev.Type == "Warning" && strings.Contains(ev.Message, "admission policy "+name+" is not in force ("+why) {
					return true
				}
			}
			return false
		}
	}
	p = e.startProbed("--probe-reach-policy=" + name)
	missing := fmt.Sprintf(`probed_probe_reach_policy_in_force{policy=%q} 0`, name)
	eventually(t, missing, 20*time.Second, func() bool { return len(p.metricLines(missing)) == 1 })
	eventually(t, "a ProbeReachPolicyMissing event on the node", 20*time.Second, missingEvent("no such ValidatingAdmissionPolicy)"))

	eventually(t, "the exec probe the pod was created with runs", 20*time.Second, func() bool { return ranCommand(p, "held", "exec [cat /tmp/healthy]") })
	eventually(t, "the record in the pod's status", 20*time.Second, func() bool {
		c := condition(e.pod("held"), "reach.probed.io")
		return c != nil && c.Status == v1.ConditionTrue && strings.HasPrefix(c.Message, "v1,app/livenessProbe=")
	})
	const mark = "cat /var/run/secrets/kubernetes.io/serviceaccount/token; exit 1"
	edited := probes{"app": {"livenessProbe": execSpec("cat", "/tmp/healthy"), "readinessProbe": execSpec("sh", "-c", mark)}}
	if err := setAnnotations(ctx, client, e.ns, "held", map[string]any{probespec.ProbesAnnotation: mustJSON(edited)}); err != nil {
		t.Fatal(err)
	}
	refused := `container "app" readinessProbe: exec.command: Forbidden: changed after probed first saw the pod, while the probe-reach admission policy is not in force (no such ValidatingAdmissionPolicy)`
	eventually(t, "the daemon's InvalidProbe", 20*time.Second, func() bool { return e.findEvent(pod.UID, "InvalidProbe", refused) != nil })
	noWorkerRuns(t, p, "token")

	p.Shutdown()
	p = e.startProbed("--probe-reach-policy=" + name)
	eventually(t, "the edit still refused after a restart of probed", 20*time.Second, func() bool {
		return len(p.metricLines("probed_probes_unapproved_reach 1")) == 1
	})
	eventually(t, "the exec probe the pod was created with runs after the restart", 20*time.Second, func() bool {
		return ranCommand(p, "held", "exec [cat /tmp/healthy]")
	})
	noWorkerRuns(t, p, "token")
	p.Shutdown()

	// deploy/'s policy and binding under the test's name, first altered.
	objs, err := loadManifests()
	if err != nil {
		t.Fatal(err)
	}
	api := client.AdmissionregistrationV1()
	var policy *admissionv1.ValidatingAdmissionPolicy
	var binding *admissionv1.ValidatingAdmissionPolicyBinding
	for _, obj := range objs {
		switch o := obj.(type) {
		case *admissionv1.ValidatingAdmissionPolicy:
			if o.Name == reachpolicy.DefaultPolicy {
				policy = o.DeepCopy()
				policy.Name = name
			}
		case *admissionv1.ValidatingAdmissionPolicyBinding:
			if o.Spec.PolicyName == reachpolicy.DefaultPolicy {
				binding = o.DeepCopy()
				binding.Name, binding.Spec.PolicyName = name, name
			}
		}
	}
	if policy == nil || binding == nil {
		t.Fatal("deploy/ has no probe-reach policy and binding")
	}
	warns := binding.DeepCopy()
	warns.Spec.ValidationActions = []admissionv1.ValidationAction{admissionv1.Warn}
	if _, err := api.ValidatingAdmissionPolicies().Create(ctx, policy, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = api.ValidatingAdmissionPolicies().Delete(ctx, name, metav1.DeleteOptions{}) })
	if _, err := api.ValidatingAdmissionPolicyBindings().Create(ctx, warns, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = api.ValidatingAdmissionPolicyBindings().Delete(ctx, name, metav1.DeleteOptions{}) })
	p = e.startProbed("--probe-reach-policy=" + name)
	eventually(t, "a binding that only warns is not in force", 20*time.Second, missingEvent("no binding denies with it in every namespace)"))
	p.Shutdown()

	// Deny, but the policy's check changed: allowed whatever the user.
	b, err := api.ValidatingAdmissionPolicyBindings().Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	b.Spec.ValidationActions = []admissionv1.ValidationAction{admissionv1.Deny}
	if _, err := api.ValidatingAdmissionPolicyBindings().Update(ctx, b, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	altered, err := api.ValidatingAdmissionPolicies().Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	altered.Spec.Validations[0].Expression = "true"
	if _, err := api.ValidatingAdmissionPolicies().Update(ctx, altered, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	p = e.startProbed("--probe-reach-policy=" + name)
	eventually(t, "an altered expression is not in force", 20*time.Second, missingEvent("its validations differ from deploy/probe-reach.yaml's)"))
	eventually(t, missing, 20*time.Second, func() bool { return len(p.metricLines(missing)) == 1 })

	// Made right while probed runs: in force at once, and the policy now
	// decides, so the held edit (made by a user it lets through) runs.
	fixed, err := api.ValidatingAdmissionPolicies().Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	fixed.Spec.Validations = policy.Spec.Validations
	if _, err := api.ValidatingAdmissionPolicies().Update(ctx, fixed, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	inForce := fmt.Sprintf(`probed_probe_reach_policy_in_force{policy=%q} 1`, name)
	eventually(t, inForce, 20*time.Second, func() bool { return len(p.metricLines(inForce)) == 1 })
	eventually(t, "the held edit runs", 20*time.Second, func() bool { return ranCommand(p, "held", "token") })
}
