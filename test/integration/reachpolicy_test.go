//go:build integration

package integration

import (
	"fmt"
	"strings"
	"testing"
	"time"

	admissionv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"

	"github.com/probed-dev/probed/pkg/reachpolicy"
)

// TestReachPolicyChecker (issue 20, item 1): probed, with its own token
// and deploy/'s ClusterRole, reads the probe-reach policy on the real API
// server. deploy/'s policy and binding, as TestMain applies them, count as
// in force; a policy that is not there is reported at start in the metric
// and a Warning event on the node; once a copy of deploy/'s is created
// under that name, the next start reports it in force.
func TestReachPolicyChecker(t *testing.T) {
	e := newEnv(t)
	ctx := e.ctx

	p := e.startProbed()
	const deployed = `probed_probe_reach_policy_in_force{policy="probed-probe-reach"} 1`
	eventually(t, deployed, 20*time.Second, func() bool { return len(p.metricLines(deployed)) == 1 })
	p.stop()

	name := "it-probe-reach-" + e.node
	p = e.startProbed("--probe-reach-policy=" + name)
	missing := fmt.Sprintf(`probed_probe_reach_policy_in_force{policy=%q} 0`, name)
	eventually(t, missing, 20*time.Second, func() bool { return len(p.metricLines(missing)) == 1 })
	eventually(t, "a ProbeReachPolicyMissing event on the node", 20*time.Second, func() bool {
		list, err := client.CoreV1().Events(metav1.NamespaceDefault).List(ctx, metav1.ListOptions{
			FieldSelector: fields.Set{"involvedObject.kind": "Node", "involvedObject.name": e.node, "reason": reachpolicy.ReasonMissing}.String(),
		})
		if err != nil || len(list.Items) == 0 {
			return false
		}
		ev := list.Items[0]
		if ev.Type != "Warning" || !strings.Contains(ev.Message, "admission policy "+name+" is not in force (no such ValidatingAdmissionPolicy)") {
			t.Errorf("event %s %q", ev.Type, ev.Message)
		}
		return true
	})
	p.stop()

	// deploy/'s policy and binding under the test's name.
	objs, err := loadManifests()
	if err != nil {
		t.Fatal(err)
	}
	api := client.AdmissionregistrationV1()
	for _, obj := range objs {
		switch o := obj.(type) {
		case *admissionv1.ValidatingAdmissionPolicy:
			if o.Name != reachpolicy.DefaultPolicy {
				continue
			}
			o = o.DeepCopy()
			o.Name = name
			if _, err := api.ValidatingAdmissionPolicies().Create(ctx, o, metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = api.ValidatingAdmissionPolicies().Delete(ctx, name, metav1.DeleteOptions{}) })
		case *admissionv1.ValidatingAdmissionPolicyBinding:
			if o.Spec.PolicyName != reachpolicy.DefaultPolicy {
				continue
			}
			o = o.DeepCopy()
			o.Name, o.Spec.PolicyName = name, name
			if _, err := api.ValidatingAdmissionPolicyBindings().Create(ctx, o, metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = api.ValidatingAdmissionPolicyBindings().Delete(ctx, name, metav1.DeleteOptions{}) })
		}
	}
	p = e.startProbed("--probe-reach-policy=" + name)
	inForce := fmt.Sprintf(`probed_probe_reach_policy_in_force{policy=%q} 1`, name)
	eventually(t, inForce, 20*time.Second, func() bool { return len(p.metricLines(inForce)) == 1 })
}
