package reachpolicy

import (
	"bytes"
	"fmt"
	"strings"

	admissionv1 "k8s.io/api/admissionregistration/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	"github.com/probed-dev/probed/deploy"
)

// Shipped is the spec of the policy deploy/probe-reach.yaml ships (the
// chart renders the same): what a policy must say to be in force, under
// whatever name.
func Shipped() (admissionv1.ValidatingAdmissionPolicySpec, error) {
	for _, doc := range bytes.Split(deploy.ProbeReach, []byte("\n---\n")) {
		var p admissionv1.ValidatingAdmissionPolicy
		if err := yaml.Unmarshal(doc, &p); err != nil {
			return admissionv1.ValidatingAdmissionPolicySpec{}, fmt.Errorf("deploy/probe-reach.yaml: %w", err)
		}
		if p.Kind == "ValidatingAdmissionPolicy" {
			return p.Spec, nil
		}
	}
	return admissionv1.ValidatingAdmissionPolicySpec{}, fmt.Errorf("deploy/probe-reach.yaml has no ValidatingAdmissionPolicy")
}

// specDiffers names the parts of a live policy's spec that differ from
// want, the shipped one; "" when none does. Both are compared as the API
// server stores them (its defaults applied), with runs of white space in
// CEL expressions and messages taken as one space, so that the chart's
// and deploy/'s renderings, and any YAML folding of them, compare equal.
func specDiffers(live, want admissionv1.ValidatingAdmissionPolicySpec) string {
	a, b := normalized(live), normalized(want)
	var differ []string
	for _, f := range []struct {
		name string
		x, y any
	}{
		{"paramKind", a.ParamKind, b.ParamKind},
		{"matchConstraints", a.MatchConstraints, b.MatchConstraints},
		{"matchConditions", a.MatchConditions, b.MatchConditions},
		{"variables", a.Variables, b.Variables},
		{"validations", a.Validations, b.Validations},
		{"auditAnnotations", a.AuditAnnotations, b.AuditAnnotations},
		{"failurePolicy", a.FailurePolicy, b.FailurePolicy},
	} {
		if !equality.Semantic.DeepEqual(f.x, f.y) {
			differ = append(differ, f.name)
		}
	}
	if len(differ) == 0 {
		return ""
	}
	return fmt.Sprintf("its %s differ from deploy/probe-reach.yaml's", strings.Join(differ, ", "))
}

// normalized is a copy of s with the API server's defaults for a
// ValidatingAdmissionPolicy (SetObjectDefaults_ValidatingAdmissionPolicy)
// and white space folded in every expression and message.
func normalized(s admissionv1.ValidatingAdmissionPolicySpec) admissionv1.ValidatingAdmissionPolicySpec {
	s = *s.DeepCopy()
	if s.FailurePolicy == nil {
		fail := admissionv1.Fail
		s.FailurePolicy = &fail
	}
	if m := s.MatchConstraints; m != nil {
		if m.MatchPolicy == nil {
			eq := admissionv1.Equivalent
			m.MatchPolicy = &eq
		}
		if m.NamespaceSelector == nil {
			m.NamespaceSelector = &metav1.LabelSelector{}
		}
		if m.ObjectSelector == nil {
			m.ObjectSelector = &metav1.LabelSelector{}
		}
		for _, rules := range [][]admissionv1.NamedRuleWithOperations{m.ResourceRules, m.ExcludeResourceRules} {
			for i := range rules {
				if rules[i].Scope == nil {
					all := admissionv1.AllScopes
					rules[i].Scope = &all
				}
			}
		}
	}
	for i := range s.MatchConditions {
		s.MatchConditions[i].Expression = fold(s.MatchConditions[i].Expression)
	}
	for i := range s.Variables {
		s.Variables[i].Expression = fold(s.Variables[i].Expression)
	}
	for i := range s.Validations {
		v := &s.Validations[i]
		v.Expression, v.Message, v.MessageExpression = fold(v.Expression), fold(v.Message), fold(v.MessageExpression)
	}
	for i := range s.AuditAnnotations {
		s.AuditAnnotations[i].ValueExpression = fold(s.AuditAnnotations[i].ValueExpression)
	}
	return s
}

// fold turns every run of white space into one space.
func fold(s string) string { return strings.Join(strings.Fields(s), " ") }
