package manifest

import (
	"context"
	"fmt"

	admissionv1 "k8s.io/api/admissionregistration/v1"
	v1 "k8s.io/api/core/v1"
	flowcontrolv1 "k8s.io/api/flowcontrol/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
)

// CreateIfMissing creates one of the kinds deploy/ ships for probed's
// access (its namespace, service accounts, RBAC, FlowSchemas and
// admission policies); one that exists already is left as it is. Another
// kind is an error: the caller decides what it skips.
func CreateIfMissing(ctx context.Context, c kubernetes.Interface, obj runtime.Object) error {
	var err error
	opts := metav1.CreateOptions{}
	switch o := obj.(type) {
	case *v1.Namespace:
		_, err = c.CoreV1().Namespaces().Create(ctx, o, opts)
	case *v1.ServiceAccount:
		_, err = c.CoreV1().ServiceAccounts(o.Namespace).Create(ctx, o, opts)
	case *rbacv1.ClusterRole:
		_, err = c.RbacV1().ClusterRoles().Create(ctx, o, opts)
	case *rbacv1.ClusterRoleBinding:
		_, err = c.RbacV1().ClusterRoleBindings().Create(ctx, o, opts)
	case *rbacv1.Role:
		_, err = c.RbacV1().Roles(o.Namespace).Create(ctx, o, opts)
	case *rbacv1.RoleBinding:
		_, err = c.RbacV1().RoleBindings(o.Namespace).Create(ctx, o, opts)
	case *flowcontrolv1.FlowSchema:
		_, err = c.FlowcontrolV1().FlowSchemas().Create(ctx, o, opts)
	case *flowcontrolv1.PriorityLevelConfiguration:
		_, err = c.FlowcontrolV1().PriorityLevelConfigurations().Create(ctx, o, opts)
	case *admissionv1.ValidatingAdmissionPolicy:
		_, err = c.AdmissionregistrationV1().ValidatingAdmissionPolicies().Create(ctx, o, opts)
	case *admissionv1.ValidatingAdmissionPolicyBinding:
		_, err = c.AdmissionregistrationV1().ValidatingAdmissionPolicyBindings().Create(ctx, o, opts)
	default:
		return fmt.Errorf("unexpected object %T", obj)
	}
	if err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("creating %T: %w", obj, err)
	}
	return nil
}
