//go:build scale

// Package apiload counts what clients cost the kube-apiserver, from the
// apiserver's own /metrics: requests by verb and resource, watch events, and
// (since apiserver_request_total has no user label) requests per identity and
// request class through API Priority and Fairness FlowSchemas. It also reads
// the control plane's CPU and memory from /proc. Used by the scale harness
// (issue 16) and its kubelet-side comparison.
package apiload

import (
	"context"
	"fmt"
	"time"

	flowv1 "k8s.io/api/flowcontrol/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
)

// apiserver_request_total has no user label, so the split by identity comes
// from API Priority and Fairness: one FlowSchema per (identity, request
// class), and the apiserver's own apiserver_flowcontrol_dispatched_requests_total
// counts each by flow_schema. The same schemas work in a real cluster.
const priorityLevel = "scale"

// identities are the two writers under study: every probed (its service
// account) and every stand-in kubelet (group system:nodes).
var Identities = []struct {
	Name    string
	subject flowv1.Subject
}{
	{"probed", flowv1.Subject{Kind: flowv1.SubjectKindServiceAccount,
		ServiceAccount: &flowv1.ServiceAccountSubject{Namespace: "probed-system", Name: "probed"}}},
	{"kubelet", flowv1.Subject{Kind: flowv1.SubjectKindGroup, Group: &flowv1.GroupSubject{Name: "system:nodes"}}},
}

// requestClasses in matching order; "other" catches the rest.
var RequestClasses = []struct {
	Name      string
	verbs     []string
	groups    []string
	resources []string
}{
	{"status-write", []string{"patch", "update"}, []string{""}, []string{"pods/status"}},
	{"event-write", []string{"create", "patch", "update"}, []string{"", "events.k8s.io"}, []string{"events"}},
	{"pod-list", []string{"list", "get"}, []string{""}, []string{"pods"}},
	{"pod-watch", []string{"watch"}, []string{""}, []string{"pods"}},
	{"other", []string{"*"}, []string{"*"}, []string{"*"}},
}

func FlowSchemaName(identity, class string) string { return "scale-" + identity + "-" + class }

// EnsureFlowSchemas creates the priority level and the schemas, and waits
// until the apiserver has taken every schema in (not dangling).
func EnsureFlowSchemas(ctx context.Context, c kubernetes.Interface) error {
	shares := int32(100)
	fc := c.FlowcontrolV1()
	// Generous seats and no borrowing limits: the schemas are for counting,
	// not for throttling what they count.
	_, err := fc.PriorityLevelConfigurations().Create(ctx, &flowv1.PriorityLevelConfiguration{
		ObjectMeta: metav1.ObjectMeta{Name: priorityLevel},
		Spec: flowv1.PriorityLevelConfigurationSpec{
			Type: flowv1.PriorityLevelEnablementLimited,
			Limited: &flowv1.LimitedPriorityLevelConfiguration{
				NominalConcurrencyShares: &shares,
				LimitResponse: flowv1.LimitResponse{Type: flowv1.LimitResponseTypeQueue,
					Queuing: &flowv1.QueuingConfiguration{Queues: 64, HandSize: 6, QueueLengthLimit: 100}},
			},
		},
	}, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		return err
	}
	var names []string
	for i, id := range Identities {
		for j, rc := range RequestClasses {
			rule := flowv1.PolicyRulesWithSubjects{
				Subjects: []flowv1.Subject{id.subject},
				ResourceRules: []flowv1.ResourcePolicyRule{{
					Verbs: rc.verbs, APIGroups: rc.groups, Resources: rc.resources,
					ClusterScope: true, Namespaces: []string{flowv1.NamespaceEvery},
				}},
			}
			if rc.Name == "other" {
				rule.NonResourceRules = []flowv1.NonResourcePolicyRule{{Verbs: []string{"*"}, NonResourceURLs: []string{"*"}}}
			}
			name := FlowSchemaName(id.Name, rc.Name)
			names = append(names, name)
			// Before the built-in schemas (system-nodes is 500,
			// service-accounts 9000), after exempt (1) and probes (2).
			_, err := fc.FlowSchemas().Create(ctx, &flowv1.FlowSchema{
				ObjectMeta: metav1.ObjectMeta{Name: name},
				Spec: flowv1.FlowSchemaSpec{
					PriorityLevelConfiguration: flowv1.PriorityLevelConfigurationReference{Name: priorityLevel},
					MatchingPrecedence:         int32(100 + 10*i + j),
					DistinguisherMethod:        &flowv1.FlowDistinguisherMethod{Type: flowv1.FlowDistinguisherMethodByUserType},
					Rules:                      []flowv1.PolicyRulesWithSubjects{rule},
				},
			}, metav1.CreateOptions{})
			if err != nil && !apierrors.IsAlreadyExists(err) {
				return fmt.Errorf("flow schema %s: %w", name, err)
			}
		}
	}
	return wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		for _, n := range names {
			fs, err := fc.FlowSchemas().Get(ctx, n, metav1.GetOptions{})
			if err != nil {
				return false, nil
			}
			ok := false
			for _, c := range fs.Status.Conditions {
				if c.Type == flowv1.FlowSchemaConditionDangling && c.Status == flowv1.ConditionFalse {
					ok = true
				}
			}
			if !ok {
				return false, nil
			}
		}
		return true, nil
	})
}
