//go:build scale

package scale

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"

	admissionv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
)

// accessManifests are the deploy/ files that give probed its identity, RBAC
// and node confinement; the DaemonSet in daemonset.yaml is skipped (no
// kubelet runs it here), and so is anything not about probed's access.
var accessManifests = []string{"daemonset.yaml", "confinement.yaml"}

// applyAccessManifests creates probed's namespace, service account, RBAC and
// the ValidatingAdmissionPolicies that confine each probed to its node, as
// shipped, so that every write measured here passed the same admission.
func applyAccessManifests(ctx context.Context, c kubernetes.Interface) error {
	for _, f := range accessManifests {
		path := filepath.Join("../../deploy", f)
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		dec := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(b)))
		for {
			doc, err := dec.Read()
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				return fmt.Errorf("%s: %w", path, err)
			}
			if len(bytes.TrimSpace(doc)) == 0 {
				continue
			}
			obj, _, err := scheme.Codecs.UniversalDeserializer().Decode(doc, nil, nil)
			if err != nil {
				return fmt.Errorf("%s: %w", path, err)
			}
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
			case *admissionv1.ValidatingAdmissionPolicy:
				_, err = c.AdmissionregistrationV1().ValidatingAdmissionPolicies().Create(ctx, o, opts)
			case *admissionv1.ValidatingAdmissionPolicyBinding:
				_, err = c.AdmissionregistrationV1().ValidatingAdmissionPolicyBindings().Create(ctx, o, opts)
			case *appsv1.DaemonSet:
				continue
			default:
				return fmt.Errorf("%s: unexpected object %T", path, obj)
			}
			if err != nil && !apierrors.IsAlreadyExists(err) {
				return fmt.Errorf("%s: creating %T: %w", path, obj, err)
			}
		}
	}
	return nil
}
